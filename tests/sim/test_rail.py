"""The fused GEMM ops' inter-node algorithms (mkernel/builders/_rail.py): every one matches numpy in
data mode with the race proof on, sends its closed-form bytes, and ``auto`` picks as declared."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mkernel import Cluster, Workload, reference
from mkernel.builders import _rail as rail
from mkernel.builders import ag_gemm, gemm_ar, gemm_rs
from mkernel.builders._tiling import split_rows
from mkernel.errors import ProblemError
from mkernel.report import static_bytes
from mkernel.reference import DATA_RTOL
from mkernel.sim import SimBackend

TOPOLOGIES = [(2, 1), (2, 2), (3, 2), (4, 1), (4, 4), (2, 8), (8, 1)]


def _check(module, w: Workload, c: Cluster, seed: int) -> None:
    inputs = module.make_inputs(w, c, np.random.default_rng(seed))
    expected = getattr(reference, w.kernel)(inputs)["OUT"]
    s = module.build(w, c)
    s.validate()  # races included
    out = SimBackend().run(s, c, inputs=inputs).outputs["OUT"]
    for rank, (o, e) in enumerate(zip(out, expected)):
        err = reference.relative_error(o, e)
        assert err <= DATA_RTOL, f"{w.internode} rank {rank}: relative error {err}"


@pytest.mark.parametrize("transport", ["ib_rc", "efa_srd"])
@pytest.mark.parametrize("algorithm", ["direct", "twoshot", "ring"])
@pytest.mark.parametrize("nodes,gpus", TOPOLOGIES)
def test_gemm_ar_algorithms_match_numpy(nodes, gpus, algorithm, transport):
    # 1100 x 520 in 128 x 256 tiles: 27 tiles with ragged edges on both axes; one tile per chunk, so
    # every topology gets whole groups of N chunks and (mostly) a direct tail after them
    w = Workload(m=1100, n=520, k=48, chunk_tiles=1, internode=algorithm)
    _check(gemm_ar, w, Cluster("t", nodes, gpus, transport=transport), nodes * 100 + gpus)


@pytest.mark.parametrize("algorithm", ["direct", "ring"])
@pytest.mark.parametrize("nodes,gpus", [(2, 2), (3, 2), (4, 1), (4, 4)])
def test_gemm_rs_ring_and_direct_match_numpy(nodes, gpus, algorithm):
    c = Cluster("t", nodes, gpus, transport="efa_srd")
    _check(gemm_rs, Workload(kernel="gemm_rs", m=136 * c.world, n=520, k=40, chunk_tiles=2, internode=algorithm),
           c, nodes * 3 + gpus)


def test_the_rs_ring_sends_what_direct_sends():
    """A ring reduce-scatter moves each block's running sum N - 1 hops: the same bytes per GPU as
    sending each node sum straight to its owner."""
    c = Cluster("t", 4, 2)
    w = Workload(kernel="gemm_rs", m=256 * c.world, n=512, k=32)
    ring, direct = (static_bytes(gemm_rs.build(dataclasses.replace(w, internode=a), c))["network"]
                    for a in ("ring", "direct"))
    assert ring == direct and ring[0] > 0


@pytest.mark.parametrize("algorithm", ["direct", "ring"])
@pytest.mark.parametrize("nodes,gpus", [(2, 2), (3, 2), (4, 1), (4, 4)])
def test_ag_gemm_forwarding_matches_numpy(nodes, gpus, algorithm):
    c = Cluster("t", nodes, gpus)
    _check(ag_gemm, Workload(kernel="ag_gemm", m=136 * c.world, n=264, k=40, internode=algorithm), c, nodes + gpus)


@pytest.mark.parametrize("algorithm", ["twoshot", "ring"])
@pytest.mark.parametrize("nodes,gpus", [(2, 2), (4, 2), (8, 1), (16, 2)])
def test_grouped_all_reduce_sends_two_shares_less_one_in_n(nodes, gpus, algorithm):
    """Reduce-scatter then all-gather: each GPU sends 2 (N - 1) / N of its owned share over the
    network, however many nodes (direct sends N - 1 shares)."""
    c = Cluster("t", nodes, gpus)
    w = Workload(m=128 * nodes, n=256 * gpus * 2, k=32, chunk_tiles=1, internode=algorithm)  # no tail
    share = w.m * w.n * 2 / gpus
    assert static_bytes(gemm_ar.build(w, c))["network"] == [2 * (nodes - 1) / nodes * share] * c.world
    direct = dataclasses.replace(w, internode="direct")
    assert static_bytes(gemm_ar.build(direct, c))["network"] == [(nodes - 1) * share] * c.world


@pytest.mark.parametrize("nodes,gpus", [(4, 2), (8, 1), (5, 2)])
def test_a_share_smaller_than_a_group_is_shared_in_row_pieces(nodes, gpus):
    """Fewer chunks than nodes: twoshot cuts the owner's slots in N row pieces (one per node), so
    each GPU still sends 2 (N - 1) / N of its share, and the result matches numpy."""
    c = Cluster("t", nodes, gpus)
    w = Workload(m=256, n=256 * gpus, k=32, chunk_tiles=4, internode="twoshot")  # 2 slots per owner
    assert gemm_ar.plan(w, c) == ("twoshot", 0, 2)
    rows = split_rows(0, 2 * w.tile_m, nodes)  # the 2 slots' rows, one piece per node (51-52 rows at 5)
    own = [r1 - r0 for r0, r1 in rows]
    # node n sends every other piece once (reduce-scatter) and its own N - 1 times (all-gather)
    expected = [(sum(own) - own[n] + (nodes - 1) * own[n]) * w.tile_n * 2 for n in range(nodes) for _ in range(gpus)]
    assert static_bytes(gemm_ar.build(w, c))["network"] == expected
    if nodes in (4, 8):  # equal pieces: exactly 2 (N - 1) / N of the share
        assert expected == [2 * (nodes - 1) / nodes * w.m * w.n * 2 / gpus] * c.world
    _check(gemm_ar, dataclasses.replace(w, m=250, n=250 * gpus), c, nodes)  # ragged: the padding travels too


def test_auto_picks_direct_at_two_nodes_and_twoshot_beyond():
    w = Workload(m=4096, n=4096, k=64)
    assert rail.choose(w, Cluster("t", 1, 8)) == "direct"
    assert rail.choose(w, Cluster("t", 2, 8)) == "direct"
    assert [rail.choose(w, Cluster("t", n, 8)) for n in (4, 16, 64)] == ["twoshot"] * 3
    assert rail.choose(dataclasses.replace(w, internode="ring"), Cluster("t", 4, 8)) == "ring"


def test_an_algorithm_the_op_lacks_is_refused_by_name():
    with pytest.raises(ProblemError, match="ag_gemm has no internode = 'twoshot'; allowed: auto, direct, ring"):
        ag_gemm.build(Workload(kernel="ag_gemm", m=512, n=256, k=64, internode="twoshot"), Cluster("t", 2, 2))


@pytest.mark.parametrize("nodes", [2, 3, 5])
def test_each_node_visits_a_group_in_its_own_order_and_the_tail_in_order(nodes):
    for algorithm in rail.GROUPED:
        orders = [rail.chunk_order(2 * nodes + 1, 2 * nodes, nodes, n, algorithm) for n in range(nodes)]
        for n, order in enumerate(orders):
            assert sorted(order) == list(range(2 * nodes + 1)) and order[-1] == 2 * nodes
            assert order[nodes - 1] == n and order[2 * nodes - 1] == nodes + n  # the own chunk last in a group
