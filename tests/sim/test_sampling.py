"""Data mode on sampled rows and columns: the plan is consistent and covers every region's ends,
its oracle agrees with the whole-array oracle, a sampled run passes a correct schedule and catches
a broken one, and the default scenario checks in well under 1 GB."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mkernel import builders, limits, reference, run_data, runner, sampled_oracle, sampling
from mkernel.cluster import Cluster
from mkernel.ir import BufferKind, Op, expand
from mkernel.problems import Workload
from mkernel.scenario import load_scenario
from mkernel.sim.backend import SimBackend

C22 = Cluster("t", 2, 2)
OPS = {
    "gemm_ar": Workload(kernel="gemm_ar", m=1000, n=776, k=72),
    "gemm_rs": Workload(kernel="gemm_rs", m=1024, n=520, k=40),
    "ag_gemm": Workload(kernel="ag_gemm", m=1024, n=300, k=64),
    "ring_attention": Workload(kernel="ring_attention", m=256, n=3, k=32, tile_m=128),
    "ring_attention_causal": Workload(kernel="ring_attention", m=256, n=3, k=32, tile_m=128, causal=1),
    "moe_dispatch_gemm": Workload(kernel="moe_dispatch_gemm", m=512, n=520, k=48, experts=16, topk=2),
}


def _schedules(w: Workload, c: Cluster = C22):
    mod = builders.get(w.kernel)
    return mod.build(w, c), mod.build_baseline(w, c)


@pytest.mark.parametrize("name", OPS)
def test_the_sampled_oracle_is_the_whole_oracle_at_its_entries(name):
    w = OPS[name]
    fused, _ = _schedules(w)
    draw = sampled_oracle.Inputs(w, C22, fused, seed=5)
    whole = sampling.Plan.whole(fused)
    want = reference.expected(w, draw.for_plan(whole), C22.gpus_per_node)
    got = sampled_oracle.expected(w, C22, draw, whole)
    sample = sampling.plan(fused, seed=5)
    picked = sampled_oracle.expected(w, C22, draw, sample)
    for out, refs in want.items():
        rows, cols = sample.indices(out, 0), sample.indices(out, 1)
        for r, ref in enumerate(refs):
            np.testing.assert_allclose(got[out][r], ref, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(picked[out][r], ref[np.ix_(rows, cols)], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", OPS)
def test_every_region_keeps_its_first_and_last_row_and_column(name):
    for schedule in _schedules(OPS[name]):
        plan = sampling.plan(schedule)
        for t in expand(schedule).tasks:  # every member: a group's regions step from member 0's
            for r in (*t.reads, *t.writes):
                for axis, lo, hi in ((0, r.row0, r.row1), (1, r.col0, r.col1)):
                    kept = set(plan.indices(r.buffer, axis).tolist())
                    assert {lo, hi - 1} <= kept, (t.describe(), r, axis)


@pytest.mark.parametrize("name", OPS)
def test_a_sampled_data_run_passes_every_op(name, monkeypatch):
    monkeypatch.setattr(limits, "WHOLE_DATA_BYTES", 0)  # sample even these small shapes
    w = OPS[name]
    sc = dataclasses.replace(load_scenario("default"), cluster=dataclasses.replace(
        load_scenario("default").cluster, nodes=2, gpus_per_node=2), workload=w)
    result, _ = runner.run(sc, data=True, seed=2)
    assert result["correct"] is True and result["baseline"]["correct"] is True, result["error"]
    if w.kernel.startswith("gemm"):
        assert "data checked on" in result["note"]


def test_a_grouped_reduction_of_regions_moved_by_offsets_keeps_one_pattern():
    """A receive-reduction group whose sources step along a row (GEMM+RS on 4 x 8 rails at a ragged
    shape): the plan must see every member's regions, or the sources' and the partial's kept columns
    differ and the sampled reduction adds arrays of different shapes."""
    sc = load_scenario("scaleout/efa-400g-rail-4x8")
    sc = dataclasses.replace(sc, workload=Workload(kernel="gemm_rs", m=640, n=520, k=72))
    result, _ = runner.run(sc, data=True, seed=5)
    assert result["correct"] is True and result["baseline"]["correct"] is True, result["error"]
    assert "data checked on" in result["note"]  # (sampled, not whole)


def test_the_gemm_plans_sample_both_axes():
    fused, baseline = _schedules(Workload(kernel="gemm_ar", m=4096, n=4096, k=64))
    for s in (fused, baseline):
        plan = sampling.plan(s)
        assert plan.keep[("OUT", 0)] is not None and plan.keep[("OUT", 1)] is not None
        assert plan.fraction() < 0.05


def _shifted(schedule, rows: int):
    """The schedule with the first intra-node copy into OUT written ``rows`` rows lower."""
    tasks = list(schedule.tasks)
    for i, t in enumerate(tasks):
        if t.op is Op.COPY and t.writes[0].buffer == "OUT" and t.writes[0].rank != t.rank:
            w = t.writes[0]
            moved = dataclasses.replace(w, row0=w.row0 + rows, row1=w.row1 + rows)
            tasks[i] = dataclasses.replace(t, writes=(moved, *t.writes[1:]))
            return dataclasses.replace(schedule, tasks=tuple(tasks))
    raise AssertionError("no copy into OUT")


@pytest.mark.parametrize("sample", [False, True])
def test_a_misplaced_write_is_caught_whether_sampled_or_not(sample):
    w, c = Workload(kernel="gemm_ar", m=2048, n=2048, k=64), Cluster("t", 1, 2)
    fused = _shifted(builders.get("gemm_ar").build(w, c), rows=w.tile_m)
    plan = sampling.plan(fused) if sample else sampling.Plan.whole(fused)
    draw = sampled_oracle.Inputs(w, c, fused, seed=1)
    stats = SimBackend().run(fused, c, inputs=draw.for_plan(plan), sample=plan)
    want = sampled_oracle.expected(w, c, draw, plan)
    worst = max(reference.relative_error(o, e) for o, e in zip(stats.outputs["OUT"], want["OUT"]))
    assert worst > 1e-3


def test_inputs_are_a_pure_function_of_their_index():
    w = OPS["gemm_ar"]
    fused, _ = _schedules(w)
    draw = sampled_oracle.Inputs(w, C22, fused, seed=3)
    whole = draw.get("A", 1)
    part = draw.get("A", 1, np.array([5, 17, 999]), np.array([0, 71]))
    np.testing.assert_array_equal(part, whole[np.ix_([5, 17, 999], [0, 71])])
    assert abs(whole.std() - 1.0) < 0.02 and abs(whole.mean()) < 0.02
    assert not np.array_equal(whole, draw.get("A", 0)) and whole.dtype == np.float32


def test_the_default_scenario_checks_in_well_under_a_gigabyte():
    fused, baseline = runner.build(load_scenario("default"))
    assert run_data.data_bytes(fused, baseline) > 4e9  # the whole arrays: why data mode samples
    assert sum(run_data.plan_bytes(sampling.plan(s)) for s in (fused, baseline)) < 0.3e9
    assert all(b.kind is not BufferKind.OUTPUT or sampling.plan(fused).keep[(b.name, 0)] is not None
               for b in fused.buffers)
