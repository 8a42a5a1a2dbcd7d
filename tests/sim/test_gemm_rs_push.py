"""GEMM+ReduceScatter with the node reduction pushed (``node_reduce = "push"``,
mkernel/builders/_gemm_rs_push.py): data mode against the float64 oracle on odd shapes, the race
proof, and that every part of the protocol matters (a push left out, its base wait left out)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from harness.pushes import assert_push_mutations_caught, assert_symmetric_and_grouped

from mkernel import Cluster, Op, Workload, reference
from mkernel.builders import gemm_rs
from mkernel.errors import ProblemError, ScenarioError
from mkernel.ir import Role
from mkernel.reference import DATA_RTOL
from mkernel.sim import SimBackend

# (nodes, gpus per node, rows per rank): m = rows x world, none a multiple of the 128-row tile, n = 520
# not one of 256; chunks of 3 tiles on several nodes
TOPOLOGIES = [(1, 2, 160), (1, 4, 150), (1, 8, 136), (2, 2, 160), (3, 2, 72), (2, 4, 100)]


def _workload(rows: int, world: int, **changes) -> Workload:
    return Workload(kernel="gemm_rs", **{**dict(m=rows * world, n=520, k=40, chunk_tiles=3, node_reduce="push"), **changes})


def _worst(s, c: Cluster, w: Workload, seed: int) -> float:
    inputs = gemm_rs.make_inputs(w, c, np.random.default_rng(seed))
    out = SimBackend().run(s, c, inputs=inputs).outputs["OUT"]
    return max(reference.relative_error(o, e) for o, e in zip(out, reference.gemm_rs(inputs)["OUT"]))


@pytest.mark.parametrize("nodes,gpus,rows,transport", [(*topology, "ib_rc") for topology in TOPOLOGIES] +
                         [(*topology, "efa_srd") for topology in TOPOLOGIES if topology[0] > 1])
def test_push_matches_the_oracle_in_data_mode_and_passes_the_race_proof(nodes, gpus, rows, transport):
    c = Cluster("t", nodes, gpus, transport=transport)
    w = _workload(rows, c.world)
    s = gemm_rs.build(w, c)
    s.validate()  # counts, bounds, cycles and races (the schedule is small enough for the race rule)
    assert _worst(s, c, w, seed=nodes * 10 + gpus) <= DATA_RTOL


@pytest.mark.parametrize("nodes", [2, 3])
def test_push_under_the_ring_reduce_scatter_between_nodes(nodes):
    """The push replaces only the node reduction: the rail ring between nodes is the pull variant's."""
    c = Cluster("t", nodes, 2)
    w = _workload(72, c.world, internode="ring")
    s = gemm_rs.build(w, c)
    s.validate()
    assert any(t.op is Op.PUT and "ring hop" in t.label for t in s.tasks)
    assert _worst(s, c, w, seed=nodes) <= DATA_RTOL


def test_the_intra_role_pushes_into_the_owner_and_the_owner_pulls_nothing():
    """On 1 x 4: every partial another rank holds of a block reaches the owner as one accumulating COPY
    per tile into the owner's own partial (P rows of the block), every intra read is local, and the
    compute role signals only its own rank (the hw GEMM table's one local flag per tile)."""
    c = Cluster("t", 1, 4)
    w = _workload(150, c.world)
    s = gemm_rs.build(w, c)
    rows = w.m // c.world
    tiles = len([t for t in s.tasks if t.rank == 0 and t.op is Op.GEMM]) // c.world
    pushes = [t for t in s.tasks if t.accumulate]
    assert len(pushes) == c.world * (c.world - 1) * tiles
    for t in pushes:
        (src,), (dst,) = t.reads, t.writes
        assert t.op is Op.COPY and t.role is Role.INTRA and src.buffer == dst.buffer == "P"
        assert src.rank == t.rank != dst.rank and dst.row0 // rows == dst.rank and (src.row0, src.col0) == (dst.row0, dst.col0)
        assert t.signals[0].rank == dst.rank
    assert all(r.rank == t.rank for t in s.tasks if t.role is Role.INTRA for r in t.reads)
    assert all(g.rank == t.rank for t in s.tasks if t.op is Op.GEMM for g in t.signals)


def test_a_push_left_out_is_caught_and_so_is_a_push_that_does_not_wait_for_the_base():
    """Drop one push and its owner's copy out waits for a bump that never comes (validate's count
    rule); take away a push's wait for the owner's base and the owner's plain store of its own partial
    races with the peer's add (the race rule): the base is what makes the accumulator start at the
    owner's partial in every call, with nothing zeroed."""
    c = Cluster("t", 1, 2)
    w = _workload(160, c.world)
    s = gemm_rs.build(w, c)
    assert_push_mutations_caught(s)


def test_push_and_pull_give_the_same_network_roles():
    """On 2 x 2 the two variants differ in their compute signals and intra queues only."""
    c = Cluster("t", 2, 2)
    w = _workload(160, c.world)
    pull, push = (gemm_rs.build(dataclasses.replace(w, node_reduce=v), c) for v in ("pull", "push"))

    def network(s):
        return [(t.rank, t.role, t.op, t.reads, t.writes, t.waits, t.signals) for t in s.tasks
                if t.role in (Role.SEND, Role.RECV)]
    assert network(pull) == network(push)
    assert {t.op for t in pull.tasks if t.role is Role.INTRA} == {Op.REDUCE}
    assert {t.op for t in push.tasks if t.role is Role.INTRA} == {Op.NOP, Op.COPY, Op.REDUCE}
    assert all(t.accumulate and len(t.reads) == 1 for t in push.tasks if t.op is Op.COPY)


def test_a_bad_node_reduce_is_one_clear_error_in_code_and_in_a_scenario():
    with pytest.raises(ProblemError, match=r"gemm_rs: node_reduce='pushed'; allowed: pull, push"):
        gemm_rs.build(_workload(160, 2, node_reduce="pushed"), Cluster("t", 1, 2))
    from mkernel.scenario import parse

    raw = {"cluster": {"nodes": 1, "gpus_per_node": 2},
           "workload": {"kernel": "gemm_rs", "m": 256, "n": 256, "k": 64, "node_reduce": "pushed"}}
    with pytest.raises(ScenarioError, match=r"key 'workload.node_reduce' is 'pushed'; allowed: pull, push"):
        parse(raw, "x.toml")


@pytest.mark.parametrize("nodes,gpus", [(3, 2), (2, 4)])
def test_push_is_node_symmetric_and_its_groups_expand_to_the_flat_build(nodes, gpus):
    c = Cluster("t", nodes, gpus)
    w = _workload(128, c.world, n=512)
    assert_symmetric_and_grouped(gemm_rs, w, c)


def test_a_push_costs_an_nvlink_write_of_its_tile_and_the_fixed_peer_cost():
    """mkernel.cost on the calibrated profile: a push waits no per-step round trip (bulk reduce-adds,
    waited for once at its end: the fixed per-task cost), so its SM time is its bytes (its local read,
    its write over NVLink at the per-SM rate), the latency and fused_peer_task_us; a pull's reduce
    still pays its steps."""
    from mkernel import cost
    from mkernel.scenario import load_scenario

    c = load_scenario("paper-ib-2x8").cluster.for_variant("fused")
    w = _workload(256, 16, n=512)
    s = gemm_rs.build(w, c)
    itemsize = {b.name: b.itemsize for b in s.buffers}
    push = next(t for t in s.tasks if t.accumulate)
    tile = push.reads[0].size * 2
    assert cost.is_push(push) and cost.step_us(push, c) == 0.0
    assert cost.sm_work_us(push, itemsize, c) == pytest.approx(
        max(tile / (c.gpu.sm_stream_gb_per_s * 1e3), tile / (c.sm_copy_gb_per_s * 1e3)) + c.nvlink.latency_us
        + c.gpu.fused_peer_task_us)
    pulled = next(t for t in gemm_rs.build(dataclasses.replace(w, node_reduce="pull"), c).tasks
                  if t.op is Op.REDUCE and t.role is Role.INTRA)
    assert not cost.is_push(pulled) and cost.step_us(pulled, c) > 0.0
