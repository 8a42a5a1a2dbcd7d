"""GEMM+AllReduce: fused and baseline match numpy in data mode, and send the closed-form bytes."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mkernel import Cluster, Op, Workload, reference
from mkernel.builders import gemm_ar
from mkernel.report import static_bytes
from mkernel.reference import DATA_RTOL
from mkernel.sim import SimBackend

TOPOLOGIES = [(1, 1), (1, 2), (1, 8), (2, 1), (2, 2), (2, 8), (3, 2), (4, 4)]


@pytest.mark.parametrize("transport", ["ib_rc", "efa_srd"])
@pytest.mark.parametrize("nodes,gpus", TOPOLOGIES)
def test_data_mode_matches_numpy(nodes, gpus, transport):
    c = Cluster("t", nodes, gpus, transport=transport)
    # 300 x 520 does not divide 128 x 256 tiles: edge tiles on both axes; chunks of 3 tiles.
    w = Workload(m=300, n=520, k=48, chunk_tiles=3, baseline_chunk_kib=16)
    inputs = gemm_ar.make_inputs(w, c, np.random.default_rng(nodes * 10 + gpus))
    expected = reference.gemm_ar(inputs)["OUT"]
    for build in (gemm_ar.build, gemm_ar.build_baseline):
        s = build(w, c)
        s.validate()
        out = SimBackend().run(s, c, inputs=inputs).outputs["OUT"]
        for rank, (o, e) in enumerate(zip(out, expected)):
            err = reference.relative_error(o, e)
            assert err <= DATA_RTOL, f"{s.variant} rank {rank}: relative error {err}"


def test_data_mode_catches_a_dropped_contribution():
    c = Cluster("t", 2, 2)
    w = Workload(m=256, n=512, k=32)
    s = gemm_ar.build(w, c)
    inputs = gemm_ar.make_inputs(w, c, np.random.default_rng(1))
    # Make one owner's reduction skip a peer's partial: the output must no longer match.
    victim = next(t for t in s.tasks if t.op is Op.REDUCE and len(t.reads) == 2 and t.reads[0].buffer == "P")
    tasks = list(s.tasks)
    tasks[victim.id] = dataclasses.replace(victim, reads=(victim.reads[0], victim.reads[0]))
    broken = dataclasses.replace(s, tasks=tuple(tasks))
    broken.validate()  # structurally fine: only the data shows the bug
    out = SimBackend().run(broken, c, inputs=inputs).outputs["OUT"]
    errs = [reference.relative_error(o, e) for o, e in zip(out, reference.gemm_ar(inputs)["OUT"])]
    assert max(errs) > 1e-2


@pytest.mark.parametrize("nodes,gpus", [(2, 2), (2, 4), (2, 8), (3, 2), (4, 8)])
def test_inter_node_bytes_match_the_closed_form(nodes, gpus):
    """With the direct exchange each GPU owns 1/G of the output and sends its partial sum once to
    each other node: network bytes sent per GPU = (nodes - 1) * m * n * itemsize / G, and as many
    received (the grouped algorithms' bytes: tests/sim/test_rail.py)."""
    c = Cluster("t", nodes, gpus)
    w = Workload(m=512, n=2048, k=64, internode="direct")  # 4 x 8 = 32 tiles: every owner gets exactly 32 / G
    s = gemm_ar.build(w, c)
    closed_form = (nodes - 1) * w.m * w.n * 2 / gpus
    sent = static_bytes(s)["network"]
    received = [0.0] * c.world
    for t in s.tasks:
        if t.op is Op.PUT:
            received[t.writes[0].rank] += sum(r.size * 2 for r in t.writes)
    assert sent == [closed_form] * c.world
    assert received == [closed_form] * c.world
    stats = SimBackend().run(s, c)
    assert stats.bytes_per_gpu["network"] == closed_form
    assert stats.bytes_total["network"] == closed_form * c.world


def test_uneven_tiles_still_send_the_whole_output_once():
    """Each node's sums go to each other node once. A message carries whole tile slots (one
    contiguous range), so ragged edge tiles travel padded to tile_m x tile_n: 3 x 3 tiles here."""
    c = Cluster("t", 2, 8)
    w = Workload(m=300, n=520, k=16)
    sent = static_bytes(gemm_ar.build(w, c))["network"]
    tiles = -(-w.m // w.tile_m) * -(-w.n // w.tile_n)
    assert sum(sent) == c.nodes * (c.nodes - 1) * tiles * w.tile_m * w.tile_n * 2


def test_fused_beats_baseline_on_a_communication_heavy_shape():
    """Not a speed target: a sanity check that the model rewards overlap where the design says it should."""
    c = Cluster("t", 2, 8)
    w = Workload(m=2048, n=2048, k=128)
    fused = SimBackend().run(gemm_ar.build(w, c), c).time_s
    base = SimBackend().run(gemm_ar.build_baseline(w, c), c).time_s
    assert fused < base
