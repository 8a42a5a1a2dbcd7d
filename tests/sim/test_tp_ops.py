"""AllGather+GEMM and GEMM+ReduceScatter: data mode against numpy on every topology and transport,
the closed-form network bytes, and the shapes they refuse."""
from __future__ import annotations

import numpy as np
import pytest

from mkernel import Cluster, Op, Workload, reference
from mkernel.builders import ag_gemm, gemm_rs
from mkernel.errors import ProblemError
from mkernel.report import static_bytes
from mkernel.reference import DATA_RTOL
from mkernel.sim import SimBackend

TOPOLOGIES = [(1, 1), (1, 2), (1, 8), (2, 1), (2, 2), (2, 8), (3, 2), (4, 4)]


def shape(kernel: str, world: int) -> Workload:
    """Small shapes with edge tiles: 150-row shards (AG), blocks of 40 rows x 300 columns (RS)."""
    if kernel == "ag_gemm":
        return Workload(kernel=kernel, m=150 * world, n=264, k=40, baseline_chunk_kib=4)
    return Workload(kernel=kernel, m=40 * world, n=300, k=24, chunk_tiles=2, tile_m=32, baseline_chunk_kib=8)


@pytest.mark.parametrize("transport", ["ib_rc", "efa_srd"])
@pytest.mark.parametrize("nodes,gpus", TOPOLOGIES)
@pytest.mark.parametrize("module", [ag_gemm, gemm_rs], ids=["ag_gemm", "gemm_rs"])
def test_data_mode_matches_numpy(module, nodes, gpus, transport):
    c = Cluster("t", nodes, gpus, transport=transport)
    kernel = module.__name__.rsplit(".", 1)[1]
    w = shape(kernel, c.world)
    inputs = module.make_inputs(w, c, np.random.default_rng(nodes * 10 + gpus))
    expected = reference.expected(w, inputs)["OUT"]
    for build in (module.build, module.build_baseline):
        s = build(w, c)
        s.validate()
        out = SimBackend().run(s, c, inputs=inputs).outputs["OUT"]
        for rank, (o, e) in enumerate(zip(out, expected)):
            err = reference.relative_error(o, e)
            assert err <= DATA_RTOL, f"{s.variant} rank {rank}: relative error {err}"


def _network_bytes(s, world: int) -> tuple[list[float], list[float]]:
    sent = static_bytes(s)["network"]
    received = [0.0] * world
    for t in s.tasks:
        if t.op is Op.PUT:
            received[t.writes[0].rank] += sum(r.size * 2 for r in t.writes)
    return sent, received


@pytest.mark.parametrize("nodes,gpus", [(2, 2), (2, 8), (3, 2), (4, 4)])
def test_ag_gemm_sends_each_shard_once_per_node(nodes, gpus):
    """Closed form: each GPU sends its m/world x k shard once to each other node, and receives one
    shard from each other node's rail peer: (nodes - 1) * (m / world) * k * 2 bytes each way."""
    c = Cluster("t", nodes, gpus)
    w = Workload(kernel="ag_gemm", m=300 * c.world, n=256, k=64)  # 300 rows: three chunks, one short
    closed_form = (nodes - 1) * (w.m // c.world) * w.k * 2
    sent, received = _network_bytes(ag_gemm.build(w, c), c.world)
    assert sent == [closed_form] * c.world and received == [closed_form] * c.world
    assert SimBackend().run(ag_gemm.build(w, c), c).bytes_per_gpu["network"] == closed_form


@pytest.mark.parametrize("nodes,gpus", [(2, 2), (2, 8), (3, 2), (4, 4)])
@pytest.mark.parametrize("n", [512, 520])
def test_gemm_rs_sends_each_remote_block_sum_once(nodes, gpus, n):
    """Closed form: each GPU sends its node's sum of each remote owner's m/world x n block once:
    (nodes - 1) * (m / world) * n * 2 bytes sent, and as many received. Messages carry whole
    tile slots (tile-major staging, one contiguous message per chunk), so a ragged edge (n = 520:
    tiles of 256, 256 and 8 columns) is sent padded to the slot width."""
    c = Cluster("t", nodes, gpus)
    w = Workload(kernel="gemm_rs", m=64 * c.world, n=n, k=32)
    slots = -(-n // w.tile_n) * w.tile_n  # columns sent per row of a block, padding included
    closed_form = (nodes - 1) * (w.m // c.world) * slots * 2
    sent, received = _network_bytes(gemm_rs.build(w, c), c.world)
    assert sent == [closed_form] * c.world and received == [closed_form] * c.world
    assert SimBackend().run(gemm_rs.build(w, c), c).bytes_per_gpu["network"] == closed_form


@pytest.mark.parametrize("module", [ag_gemm, gemm_rs], ids=["ag_gemm", "gemm_rs"])
def test_rows_that_do_not_split_over_the_world_are_refused(module):
    with pytest.raises(ProblemError, match="m must be a multiple of 16, got 1000"):
        module.check(Workload(m=1000, n=256, k=64), Cluster("t", 2, 8))


def test_ag_gemm_computes_the_local_shard_first_and_remote_shards_last():
    c = Cluster("t", 2, 2)
    s = ag_gemm.build(Workload(kernel="ag_gemm", m=4 * 128, n=256, k=64), c)
    order = [t.label.split()[1] for t in s.tasks if t.rank == 0 and t.op is Op.GEMM]
    assert order == ["0", "1", "2", "3"]  # own, node peer, rail peer in node 1, its node peer
    first = next(t for t in s.tasks if t.rank == 0 and t.op is Op.GEMM)
    assert not first.waits and first.reads[0].buffer == "A"  # read in place, no wait


@pytest.mark.parametrize("module", [ag_gemm, gemm_rs], ids=["ag_gemm", "gemm_rs"])
def test_fused_beats_baseline_on_a_communication_heavy_shape(module):
    """Not a speed target: the model rewards overlap where the design says it should."""
    c = Cluster("t", 2, 8)
    kernel = module.__name__.rsplit(".", 1)[1]
    w = Workload(kernel=kernel, m=4096, n=4096 if kernel == "gemm_rs" else 256, k=256 if kernel == "gemm_rs" else 4096)
    assert SimBackend().run(module.build(w, c), c).time_s < SimBackend().run(module.build_baseline(w, c), c).time_s


@pytest.mark.parametrize("nodes,gpus", [(3, 2), (4, 4)])
def test_ag_gemm_ring_forwarding_matches_numpy_and_sends_the_same_bytes(nodes, gpus):
    """Relaying shards node to node moves, per GPU, the same (nodes - 1) shards as direct sends."""
    c = Cluster("t", nodes, gpus, transport="efa_srd")
    w = Workload(kernel="ag_gemm", m=150 * c.world, n=264, k=40, internode="ring")
    s = ag_gemm.build(w, c)
    s.validate()
    inputs = ag_gemm.make_inputs(w, c, np.random.default_rng(5))
    out = SimBackend().run(s, c, inputs=inputs).outputs["OUT"]
    for o, e in zip(out, reference.expected(w, inputs)["OUT"]):
        assert reference.relative_error(o, e) <= DATA_RTOL
    sent, _ = _network_bytes(s, c.world)
    assert sent == [(nodes - 1) * 150 * w.k * 2] * c.world


RING_SHAPES = {"gemm_ar": lambda world: dict(m=300, n=520, k=24, chunk_tiles=2, baseline_chunk_kib=8),
               "gemm_rs": lambda world: dict(m=40 * world, n=300, k=24, baseline_chunk_kib=8),
               "ag_gemm": lambda world: dict(m=150 * world, n=264, k=40, baseline_chunk_kib=4)}


@pytest.mark.parametrize("transport", ["ib_rc", "efa_srd"])
@pytest.mark.parametrize("nodes,gpus", TOPOLOGIES)
@pytest.mark.parametrize("kernel", sorted(RING_SHAPES))
def test_flat_ring_baselines_match_numpy(kernel, nodes, gpus, transport):
    """NCCL's flat ring over every rank (NVLink hops in a node, one network hop out of each node)."""
    from mkernel.builders import get

    c = Cluster("t", nodes, gpus, transport=transport)
    w = Workload(kernel=kernel, baseline="ring", **RING_SHAPES[kernel](c.world))
    module = get(kernel)
    s = module.build_baseline(w, c)
    s.validate()
    assert "ring" in s.variant
    inputs = module.make_inputs(w, c, np.random.default_rng(nodes + gpus))
    out = SimBackend().run(s, c, inputs=inputs).outputs["OUT"]
    for o, e in zip(out, reference.expected(w, inputs, gpus)["OUT"]):
        assert reference.relative_error(o, e) <= DATA_RTOL
