"""Ring Attention: data mode (out and lse) against numpy on every topology and transport, the
closed-form network bytes, and the shapes it refuses."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mkernel import Cluster, Op, Workload, reference
from mkernel.builders import ring_attention as ra
from mkernel.errors import ProblemError
from mkernel.report import static_bytes
from mkernel.reference import DATA_RTOL
from mkernel.sim import SimBackend

TOPOLOGIES = [(1, 1), (1, 2), (1, 8), (2, 1), (2, 2), (2, 8), (3, 2), (4, 4)]


@pytest.mark.parametrize("transport", ["ib_rc", "efa_srd"])
@pytest.mark.parametrize("nodes,gpus", TOPOLOGIES)
def test_data_mode_matches_numpy(nodes, gpus, transport):
    c = Cluster("t", nodes, gpus, transport=transport)
    w = Workload(kernel="ring_attention", m=40, n=2, k=32, tile_m=16, baseline_chunk_kib=2)  # 40 = 16+16+8
    inputs = ra.make_inputs(w, c, np.random.default_rng(nodes * 10 + gpus))
    expected = reference.expected(w, inputs)
    for build in (ra.build, ra.build_baseline):
        s = build(w, c)
        s.validate()
        stats = SimBackend().run(s, c, inputs=inputs)
        for name in ("OUT", "LSE"):
            for rank, (o, e) in enumerate(zip(stats.outputs[name], expected[name])):
                err = reference.relative_error(o, e)
                assert err <= DATA_RTOL, f"{s.variant} {name} rank {rank}: relative error {err}"


@pytest.mark.parametrize("kv_tile,causal", [(16, 0), (24, 1), (64, 0)])
def test_every_kv_ring_tile_size_computes_the_same_attention(kv_tile, causal):
    """``kv_tile`` (rows of K and V per NVLink ring step): tiles that divide the slice, a ragged last
    tile, and one tile for the whole slice, against numpy on a node of four GPUs and across two."""
    for nodes, gpus in ((1, 4), (2, 2)):
        c = Cluster("t", nodes, gpus)
        w = Workload(kernel="ring_attention", m=40, n=2, k=32, tile_m=16, baseline_chunk_kib=2, kv_tile=kv_tile,
                     causal=causal)
        inputs = ra.make_inputs(w, c, np.random.default_rng(kv_tile))
        expected = reference.expected(w, inputs)
        s = ra.build(w, c)
        s.validate()
        ring = [t for t in s.tasks if t.rank == 0 and t.op is Op.COPY]
        assert {t.reads[0].shape[0] for t in ring} <= {min(kv_tile, 40), 40 % kv_tile}
        stats = SimBackend().run(s, c, inputs=inputs)
        for name in ("OUT", "LSE"):
            for rank, (o, e) in enumerate(zip(stats.outputs[name], expected[name])):
                assert reference.relative_error(o, e) <= DATA_RTOL, (name, rank)


def test_a_kv_tile_below_one_row_is_refused():
    with pytest.raises(ProblemError, match="ring_attention needs kv_tile .* >= 1, got 0"):
        ra.build(Workload(kernel="ring_attention", m=40, n=2, k=32, tile_m=16, kv_tile=0), Cluster("t", 1, 2))


def test_a_kv_tile_that_would_declare_too_many_ring_copies_is_refused_before_building():
    """Tiny ring tiles multiply the node ring's copies, which the memory estimate counts (mkernel.limits):
    refused with the figures before anything is built; the default tile on the same shape is not."""
    from mkernel import limits
    from mkernel.errors import InputError

    w = Workload(kernel="ring_attention", m=12288, n=64, k=128, tile_m=3072)
    c = Cluster("t", 1, 8)
    with pytest.raises(InputError, match="tasks"):
        limits.check_tasks(dataclasses.replace(w, kv_tile=1), c, 0, False, 0)
    assert limits.estimate(dataclasses.replace(w, kv_tile=1), c).tasks > 100 * limits.estimate(w, c).tasks
    limits.check_tasks(w, c, 0, False, 0)


@pytest.mark.parametrize("nodes,gpus", [(2, 2), (2, 8), (3, 2), (4, 4)])
def test_each_kv_slice_crosses_the_network_once_per_node(nodes, gpus):
    """Closed form: each GPU sends its K and V slices (BH*S x D each) once to each other node:
    (nodes - 1) * 2 * BH * S * D * 2 bytes, and receives as many."""
    c = Cluster("t", nodes, gpus)
    w = Workload(kernel="ring_attention", m=64, n=4, k=64, tile_m=32)
    s = ra.build(w, c)
    closed_form = (nodes - 1) * 2 * w.n * w.m * w.k * 2
    received = [0.0] * c.world
    for t in s.tasks:
        if t.op is Op.PUT:
            received[t.writes[0].rank] += sum(r.size * 2 for r in t.writes)
    assert static_bytes(s)["network"] == [closed_form] * c.world
    assert received == [closed_form] * c.world


def test_head_dimension_must_be_a_multiple_of_16():
    with pytest.raises(ProblemError, match="multiple of 16, got 72"):
        ra.check(Workload(kernel="ring_attention", m=64, n=4, k=72), Cluster("t", 1, 2))


def test_fused_beats_baseline_on_the_grid_shape():
    """Not a speed target: with the KV all-gather exposed, the baseline must lose (sequence 768)."""
    c = Cluster("t", 2, 8)
    w = Workload(kernel="ring_attention", m=768, n=64, k=128, tile_m=384)
    assert SimBackend().run(ra.build(w, c), c).time_s < SimBackend().run(ra.build_baseline(w, c), c).time_s


@pytest.mark.parametrize("transport", ["ib_rc", "efa_srd"])
@pytest.mark.parametrize("nodes,gpus", [(1, 1), (1, 2), (2, 1), (2, 2), (3, 2), (2, 4)])
def test_causal_data_mode_matches_numpy(nodes, gpus, transport):
    c = Cluster("t", nodes, gpus, transport=transport)
    w = Workload(kernel="ring_attention", m=40, n=2, k=32, tile_m=16, baseline_chunk_kib=2, causal=1)
    inputs = ra.make_inputs(w, c, np.random.default_rng(nodes + 7 * gpus))
    expected = reference.expected(w, inputs)
    for build in (ra.build, ra.build_baseline):
        s = build(w, c)
        s.validate()
        stats = SimBackend().run(s, c, inputs=inputs)
        for name in ("OUT", "LSE"):
            for o, e in zip(stats.outputs[name], expected[name]):
                assert reference.relative_error(o, e) <= DATA_RTOL


def test_zigzag_gives_every_rank_the_same_causal_work():
    """Visible (query, key) pairs per rank under the zigzag split: equal on every rank, and half of
    the non-causal work plus the diagonal."""
    c = Cluster("t", 2, 4)
    w = Workload(kernel="ring_attention", m=64, n=1, k=16, tile_m=32, causal=1)
    work = [0.0] * c.world
    for t in ra.build(w, c).tasks:
        if t.op is Op.ATTN:
            q, k = t.reads[0].shape[0], t.reads[1].shape[0]
            work[t.rank] += q * k / 2 if t.mask else q * k
    assert len(set(work)) == 1
    assert work[0] == pytest.approx((c.world * w.m) ** 2 / 2 / c.world, rel=0.02)


def test_causal_needs_an_even_sequence():
    with pytest.raises(ProblemError, match="must be even, got 33"):
        ra.check(Workload(kernel="ring_attention", m=33, n=2, k=32, causal=1), Cluster("t", 1, 2))


@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("nodes,gpus", [(1, 4), (2, 2)])
def test_ring_moves_kv_in_128_row_tiles(nodes, gpus, causal):
    """288 rows per slice: three ring steps per head (128, 128, 32 rows), each awaited on its own."""
    c = Cluster("t", nodes, gpus)
    w = Workload(kernel="ring_attention", m=288, n=1, k=16, tile_m=96, causal=causal)
    s = ra.build(w, c)
    s.validate()
    ring = [t for t in s.tasks if t.op is Op.COPY and t.rank == 0]
    assert ring and {t.reads[0].shape[0] for t in ring} == {128, 32}
    inputs = ra.make_inputs(w, c, np.random.default_rng(9))
    stats = SimBackend().run(s, c, inputs=inputs)
    for name, refs in reference.expected(w, inputs).items():
        for o, e in zip(stats.outputs[name], refs):
            assert reference.relative_error(o, e) <= DATA_RTOL


@pytest.mark.parametrize("nodes,gpus", [(1, 4), (2, 4), (4, 2)])
@pytest.mark.parametrize("causal", [0, 1])
def test_each_norm_waits_for_every_merge_into_its_tile(nodes, gpus, causal):
    """A norm's wait count is every attention member's bump of its tile's counter (two tiles share a
    counter in a causal build on several nodes): counted here over the expanded schedule, against the
    count the builder derives from its runs (equal: one fewer and a norm would run before a merge).
    Grouped and flat builds, the fused kernel and the baseline, whole, first-node and local-rank-0 builds."""
    from collections import Counter

    from mkernel.ir import expand

    c = Cluster("t", nodes, gpus)
    w = Workload(kernel="ring_attention", m=96, n=3, k=32, tile_m=16, causal=causal)
    builds = [(ra.build, {}), (ra.build_baseline, {})]
    if nodes > 1:
        builds += [(ra.build, {"first_nodes": 1}), (ra.build, {"first_nodes": 1, "local_fold": True})]
    norms = 0
    for build, kw in builds:
        for grouped in (True, False):
            s = expand(build(w, c, grouped=grouped, **kw))
            bumps = Counter(g for t in s.tasks if t.op is Op.ATTN for g in t.signals)
            for t in s.tasks:
                if t.op is Op.NORM:
                    (wait,) = t.waits
                    assert wait.count == bumps[wait.signal] > 0, (build.__name__, kw, grouped, t.describe())
                    norms += 1
    assert norms > 100
