"""The paper check (mkernel/studies/paper_check.py): its grading, and a slice of it in CI.

The whole check (every op, size and testbed) is tools/studies/paper_check.py; its result, what misses
and why are in docs/results/2026-12-05-paper-check.md (earlier: 2026-12-04-fidelity.md,
2026-12-02-paper-check.md). Here: the grading rules on made-up rows, the tuned-split points (a splits
table of `mkernel sweep --comm-sms`), and three figures on the simulator: one met, two missed (xfail,
strict: a fix that meets one must update the note)."""
from __future__ import annotations

import pytest

from mkernel.errors import InputError
from mkernel.ir import Role
from mkernel.studies import paper_check, splits, sweep
from mkernel.studies.paper_check import Figure


def _rows(op: str, testbed: str, speedups: dict[int, float]) -> list[dict]:
    return [{"kernel": op, "testbed": testbed, "size": s, "paper_speedup": v, "kernels": "reference"}
            for s, v in speedups.items()]


def test_the_bundled_figures_cover_every_op_and_both_testbeds():
    figures, tol = paper_check.load()
    assert tol == 0.15
    assert {f.op for f in figures} == {"ag_gemm", "gemm_ar", "gemm_rs", "moe_dispatch_gemm", "ring_attention"}
    assert {f.testbed for f in figures} == {"paper-ib-2x8", "paper-efa-2x8"}


def test_grading_a_peak_a_range_and_a_crossover():
    peak = Figure("gemm_ar", "t", "peak", "q", value=1.5)
    rng = Figure("gemm_rs", "t", "range", "q", low=1.0, high=1.3, min_size=16)
    cross = Figure("gemm_rs", "t", "crossover", "q", min_size=16)
    good = _rows("gemm_ar", "t", {8: 1.2, 16: 1.6}) + _rows("gemm_rs", "t", {8: 0.9, 16: 1.1, 32: 1.4})
    v = {x.figure.check: x for x in paper_check.verdicts([peak, rng, cross], good, 0.15)}
    assert v["peak"].ok and v["peak"].error == pytest.approx(1.6 / 1.5 - 1)
    assert v["range"].ok  # 1.4 is within 15% of 1.3
    assert v["crossover"].ok
    bad = _rows("gemm_ar", "t", {8: 2.0}) + _rows("gemm_rs", "t", {8: 1.1, 16: 0.8, 32: 1.6})
    v = {x.figure.check: x for x in paper_check.verdicts([peak, rng, cross], bad, 0.15)}
    assert not v["peak"].ok and not v["range"].ok and not v["crossover"].ok
    assert v["crossover"].error == 2  # both sides wrong
    assert paper_check.verdicts([peak], _rows("gemm_ar", "other", {8: 1.5}), 0.15) == []  # not simulated: not graded


def _table(points: list[sweep.Point], best: int, path, kernels: str = "reference"):
    """A splits table (as `mkernel sweep --comm-sms` writes it) whose best split is ``best`` for every
    point, tuned on the ``kernels`` profile."""
    rows = []
    for p in points:
        sc = sweep.scenario_of(sweep.Point(p.testbed, p.kernel, p.size, p.shape, (("kernels", kernels),)))
        rows.append({"key": splits.key(sc), "cluster": splits.digest(sc), "best": best, "normalised": {best: 1.0}})
    return splits.write(rows, path)


def test_a_tuned_check_runs_each_gemm_op_at_its_tables_split_and_refuses_a_stale_table(tmp_path):
    figures, _ = paper_check.load()
    pts = paper_check.points(figures, sizes=1)
    table = _table([p for p in pts if p.kernel in paper_check.TUNED], 20, tmp_path / "ref.json")
    tuned = paper_check.points(figures, sizes=1, tuned=table)
    assert [p.kernel for p in tuned] == [p.kernel for p in pts]
    for p in tuned:
        sc = sweep.scenario_of(p)
        intra = dict(sc.workload.sms).get(Role.INTRA)
        assert (intra == 20) == (p.kernel in paper_check.TUNED), (p.key, intra)  # MoE and attention keep theirs
    stale = _table([p for p in pts if p.kernel in paper_check.TUNED], 20, tmp_path / "meas.json", "measured")
    with pytest.raises(InputError, match="tuned on other cluster parameters"):
        paper_check.points(figures, sizes=1, tuned=stale)
    with pytest.raises(InputError, match="intra_sms=0 must be an SM count"):
        sweep.scenario_of(sweep.Point("paper-ib-2x8", "gemm_ar", 2048, (), (("intra_sms", 0),)))


def _figure(op: str, testbed: str, check: str) -> Figure:
    figures, _ = paper_check.load()
    return next(f for f in figures if (f.op, f.testbed, f.check) == (op, testbed, check))


@pytest.mark.xfail(strict=True, reason="AG+GEMM peaks at 1.64x at M = 8192 on EFA (paper: at most 1.41x, +16%): "
                                       "NCCL's all_gather of 128 MiB on 2 x p5en runs Simple (aws-ofi-nccl's 35 us "
                                       "moves NCCL's switch to 96 MiB), 512 KiB a channel, where four FIFO slots do "
                                       "not cover a slot's round trip: 708 us against LL128's 530 with p5en's hop "
                                       "(0.5 x the plugin's 35 us; 1008 against 550 with p5's 37.5 us). "
                                       "docs/results/2026-12-05-efa-fidelity.md")
def test_ag_gemm_peak_on_efa_over_the_first_three_sizes(tmp_path):
    fig = _figure("ag_gemm", "paper-efa-2x8", "peak")
    rows = paper_check.run([fig], tmp_path, sizes=3)
    (v,) = paper_check.verdicts([fig], rows, 0.15)
    assert v.ok, v.detail


def _crossover(testbed: str, sizes: tuple[int, ...], tmp_path) -> paper_check.Verdict:
    fig = _figure("gemm_rs", testbed, "crossover")
    points = [p for p in paper_check.points([fig]) if p.size in sizes]
    (v,) = paper_check.verdicts([fig], sweep.run_grid(points, tmp_path), 0.15)
    return v


def test_gemm_rs_is_slower_than_nccl_below_16k_and_faster_at_it_on_ib(tmp_path):
    v = _crossover("paper-ib-2x8", (8192, 16384), tmp_path)
    assert v.ok, v.detail


@pytest.mark.xfail(strict=True, reason="GEMM+RS at M = 2048 is 1.49x faster than NCCL on EFA in the simulator: NCCL's "
                                       "reduce-scatter of 8 MiB over 2 x p5en is latency-bound (116 us, its 15 ring "
                                       "steps) while the fused op takes 83 us, two network chunks a GPU; no EFA term "
                                       "consistent with the published p5 latencies adds the 40 us it would take. "
                                       "docs/results/2026-12-05-efa-fidelity.md")
def test_gemm_rs_is_slower_than_nccl_at_2048_on_efa(tmp_path):
    v = _crossover("paper-efa-2x8", (2048,), tmp_path)
    assert v.ok, v.detail
