"""GEMM+AllReduce with the node reduction pushed (``node_reduce = "push"``,
mkernel/builders/_gemm_ar_push.py): data mode against the float64 oracle on odd shapes under every
inter-node algorithm, the race proof, and that every part of the protocol matters (a push left out,
its base wait left out)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from harness.pushes import assert_push_mutations_caught, assert_symmetric_and_grouped

from mkernel import Cluster, Op, Workload, reference
from mkernel.builders import gemm_ar
from mkernel.errors import ProblemError, ScenarioError
from mkernel.ir import Role
from mkernel.reference import DATA_RTOL
from mkernel.sim import SimBackend

# (nodes, gpus per node): m = 300 rows and n = 520 columns, neither a multiple of the 128 x 256 tile
TOPOLOGIES = [(1, 2), (1, 4), (1, 8), (2, 2), (3, 2), (2, 4)]


def _workload(**changes) -> Workload:
    return Workload(kernel="gemm_ar", **{**dict(m=300, n=520, k=40, chunk_tiles=1, node_reduce="push"), **changes})


def _worst(s, c: Cluster, w: Workload, seed: int) -> float:
    inputs = gemm_ar.make_inputs(w, c, np.random.default_rng(seed))
    out = SimBackend().run(s, c, inputs=inputs).outputs["OUT"]
    return max(reference.relative_error(o, e) for o, e in zip(out, reference.gemm_ar(inputs)["OUT"]))


@pytest.mark.parametrize("nodes,gpus,transport", [(*topology, "ib_rc") for topology in TOPOLOGIES] +
                         [(2, 2, "efa_srd"), (3, 2, "efa_srd")])
def test_push_matches_the_oracle_in_data_mode_and_passes_the_race_proof(nodes, gpus, transport):
    c = Cluster("t", nodes, gpus, transport=transport)
    w = _workload()
    s = gemm_ar.build(w, c)
    s.validate()  # counts, bounds, cycles and races (the schedule is small enough for the race rule)
    assert _worst(s, c, w, seed=nodes * 10 + gpus) <= DATA_RTOL


# every inter-node algorithm and plan (mkernel.builders.gemm_ar.plan): grouped chunks (whole), a shared
# exchange of a share too small for one group, and the direct rest after either
@pytest.mark.parametrize("nodes,gpus,shape,internode,planned", [
    (3, 2, (520, 1000, 1), "ring", ("ring", 9, 0)), (3, 2, (520, 1000, 1), "twoshot", ("twoshot", 9, 0)),
    (2, 4, (700, 1030, 1), "twoshot", ("twoshot", 6, 0)), (3, 2, (300, 520, 3), "twoshot", ("twoshot", 0, 4)),
    (3, 2, (300, 520, 1), "twoshot", ("twoshot", 3, 0)), (2, 2, (300, 1030, 3), "direct", ("direct", 0, 0))])
def test_push_under_every_algorithm_between_nodes(nodes, gpus, shape, internode, planned):
    """The push replaces only the node reduction: the network phase is the pull variant's, whichever it is."""
    c = Cluster("t", nodes, gpus)
    m, n, chunk_tiles = shape
    w = _workload(m=m, n=n, chunk_tiles=chunk_tiles, internode=internode)
    assert gemm_ar.plan(w, c) == planned
    s = gemm_ar.build(w, c)
    s.validate()
    assert _worst(s, c, w, seed=nodes + gpus) <= DATA_RTOL


def test_the_intra_role_pushes_into_the_owner_then_broadcasts_by_unicast():
    """On 1 x 4: every partial another rank holds of a tile reaches the tile's owner (local t mod G) as
    one accumulating COPY per tile into the owner's own partial, every intra read is local, the compute
    role signals only its own rank, and the owner's final tile goes to each peer as one COPY pair per
    peer (the pull variant's broadcast: unicast, one destination rank per pair)."""
    c = Cluster("t", 1, 4)
    w = _workload(m=600, n=1030)
    s = gemm_ar.build(w, c)
    tiles = len([t for t in s.tasks if t.rank == 0 and t.op is Op.GEMM])
    pushes = [t for t in s.tasks if t.accumulate]
    assert len(pushes) == c.world * tiles - tiles  # each rank pushes every tile it does not own
    grid = gemm_ar.tile_grid(w.m, w.n, w.tile_m, w.tile_n)
    owner = {(u.row0, u.col0): u.index % c.gpus_per_node for u in grid}
    for t in pushes:
        (src,), (dst,) = t.reads, t.writes
        assert t.op is Op.COPY and t.role is Role.INTRA and src.buffer == dst.buffer == "P"
        assert src.rank == t.rank != dst.rank == owner[(dst.row0, dst.col0)] and src == dataclasses.replace(dst, rank=t.rank)
        assert t.signals[0].rank == dst.rank
    assert all(r.rank == t.rank for t in s.tasks if t.role is Role.INTRA for r in t.reads)
    assert all(g.rank == t.rank for t in s.tasks if t.op is Op.GEMM for g in t.signals)
    bcasts = [t for t in s.tasks if t.op is Op.COPY and not t.accumulate]
    assert len(bcasts) == len(grid)
    for t in bcasts:
        assert sorted(r.rank for r in t.writes) == sorted(set(range(c.world)) - {t.rank})
        assert all(r.rank == t.rank for r in t.reads)


def test_a_push_left_out_is_caught_and_so_is_a_push_that_does_not_wait_for_the_base():
    """Drop one push and its owner's copy out waits for a bump that never comes (validate's count
    rule); take away a push's wait for its owner's base and the owner's plain store of its own partial
    races with the peer's add (the race rule)."""
    c = Cluster("t", 1, 2)
    w = _workload()
    s = gemm_ar.build(w, c)
    assert_push_mutations_caught(s)


@pytest.mark.parametrize("internode", ["direct", "twoshot"])
def test_push_and_pull_give_the_same_network_roles(internode):
    """On 2 x 2 the two variants differ in their compute signals and intra queues only."""
    c = Cluster("t", 2, 2)
    w = _workload(m=520, n=1000, internode=internode)
    pull, push = (gemm_ar.build(dataclasses.replace(w, node_reduce=v), c) for v in ("pull", "push"))

    def network(s):
        return [(t.rank, t.role, t.op, t.reads, t.writes, t.waits, t.signals) for t in s.tasks
                if t.role in (Role.SEND, Role.RECV)]
    assert network(pull) == network(push)
    assert {t.op for t in pull.tasks if t.role is Role.INTRA} == {Op.REDUCE, Op.COPY}
    assert {t.op for t in push.tasks if t.role is Role.INTRA} == {Op.NOP, Op.COPY, Op.REDUCE}
    assert all(len(t.reads) == 1 for t in push.tasks if t.op is Op.REDUCE and t.role is Role.INTRA)


def test_a_bad_node_reduce_is_one_clear_error_in_code_and_in_a_scenario():
    with pytest.raises(ProblemError, match=r"gemm_ar: node_reduce='pushed'; allowed: pull, push"):
        gemm_ar.build(_workload(node_reduce="pushed"), Cluster("t", 1, 2))
    from mkernel.scenario import parse

    raw = {"cluster": {"nodes": 1, "gpus_per_node": 2},
           "workload": {"kernel": "ag_gemm", "m": 256, "n": 256, "k": 64, "node_reduce": "push"}}
    with pytest.raises(ScenarioError, match=r"node_reduce = 'push' applies to gemm_rs and gemm_ar only, not ag_gemm"):
        parse(raw, "x.toml")


@pytest.mark.parametrize("nodes,gpus,internode", [(3, 2, "direct"), (2, 4, "twoshot"), (3, 2, "ring")])
def test_push_is_node_symmetric_and_its_groups_expand_to_the_flat_build(nodes, gpus, internode):
    c = Cluster("t", nodes, gpus)
    w = _workload(m=512, n=2048, chunk_tiles=4, internode=internode)
    assert gemm_ar.node_symmetric(w, c)
    assert_symmetric_and_grouped(gemm_ar, w, c)
