"""``auto`` on the 2026-12-04 scale-out study (mkernel/studies/autopick.py, holdout.py, issue 31),
read from its committed data (simulated times in results.jsonl, the model's estimates in
estimates.jsonl). The oracle is the simulator's forced-fused and baseline times: auto, deciding by
simulation, must have run the faster at every point; the estimate rule it falls back on without a
simulator must lose no held-out point, its factors being the rule's; a stale estimates table is
caught by recomputing a seeded sample of it with the code."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from mkernel.builders._auto import FALLBACK_SLACK, HELD_OUT_MARGIN
from mkernel.errors import InputError
from mkernel.studies import autopick, holdout, study

DATA = Path(__file__).resolve().parents[2] / "docs/results/auto-2026-12-04"


@pytest.fixture(scope="module")
def cases():
    return holdout.load_cases(DATA)


def test_the_data_holds_every_forced_point_with_its_estimates(cases):
    assert len(cases) == 252 and {c.kernel for c in cases} == set(FALLBACK_SLACK)
    assert all(c.fused_est_us > 0 and c.baseline_est_us > 0 for c in cases)


def test_auto_ran_the_faster_schedule_at_every_study_point():
    pairs = autopick.pairs(DATA)
    assert len(pairs) == 252
    assert autopick.mismatches(pairs) == []
    assert all(p.auto_speedup >= 1 - autopick.TOLERANCE for p in pairs)
    assert {p.auto_ran for p in pairs} == {"fused", "baseline"}  # both picks are exercised


def test_the_oracle_refuses_a_pick_that_is_slower_or_beats_both_without_another_algorithm():
    def pair(auto_us: float, ran: str, auto_internode: str | None = "ring") -> autopick.Pair:
        return autopick.Pair("gemm_rs", "", "ib", 2, 4096, fused_us=100.0, baseline_us=120.0, auto_us=auto_us,
                             auto_ran=ran, internode="ring", auto_internode=auto_internode, sim_wall_s=1.0)
    good = [pair(100.0, "fused"), pair(90.0, "fused", "direct")]
    bad = [pair(120.0, "baseline"), pair(100.0, "baseline"), pair(101.0, "fused"), pair(90.0, "fused"),
           pair(90.0, "baseline", "direct")]
    assert autopick.mismatches(good) == [] and autopick.mismatches(bad) == bad


def test_the_committed_fallback_is_the_rule_on_the_study(cases):
    """FALLBACK_SLACK and HELD_OUT_MARGIN are what the margin rule gives on every point: lowering one
    by hand, or a change of the estimates, fails here until the table is rewritten."""
    assert holdout.held_out_margin(cases) == pytest.approx(HELD_OUT_MARGIN)
    assert holdout.fallback_factors(cases) == pytest.approx(FALLBACK_SLACK)


def test_the_margin_rule_loses_no_held_out_point_on_any_split(cases):
    """Refitted on each fold's training points, with the margin learned from the other ops alone."""
    results = holdout.holdout(cases, FALLBACK_SLACK)
    assert {r.split for r in results} == {"topology", "nodes", "size", "variant"}
    lost = [(r.kernel, r.fold, r.refit["margin"].losses) for r in results if r.refit["margin"].losses]
    assert lost == []
    # the 2026-12-03 rule, fitted on the losers alone, does lose out of sample: the check can fail
    assert any(r.refit["losers"].losses for r in results)


def test_every_split_holds_each_point_out_once_and_trains_on_the_rest(cases):
    mine = [c for c in cases if c.kernel == "ring_attention"]
    for split, folds in holdout.splits(mine).items():
        held = [c for _, test in folds for c in mine if test(c)]
        assert len(held) == len(set(held)), split
        assert split == "nodes" or set(held) == set(mine), split


def test_a_seeded_sample_of_the_stored_estimates_matches_the_code():
    stored = {r.key: r for r in holdout.load_cases(DATA)}
    forced = [p for p in study.auto_points() if p.key in stored and p.testbed.endswith(("-2x8", "-4x8"))]
    for p in random.Random(31).sample(forced, 4):
        got = holdout.estimate(p)
        assert got["fused_est_us"] == pytest.approx(stored[p.key].fused_est_us, rel=1e-9), p.key
        assert got["baseline_est_us"] == pytest.approx(stored[p.key].baseline_est_us, rel=1e-9), p.key


def _case(speedup: float, ratio: float, error: float = 1.0, kernel: str = "gemm_rs", size: int = 4096) -> holdout.Case:
    """A point with the given simulated speedup and estimate ratio (baseline estimate 100 us)."""
    return holdout.Case("k", kernel, "", "ib-400g-rail", 2, size, fused_us=100 * error / speedup,
                        baseline_us=100 * error, fused_est_us=100 / ratio, baseline_est_us=100)


def test_the_rules_send_the_points_they_were_fitted_on_to_the_baseline():
    train = [_case(0.9, 1.5), _case(1.2, 2.0), _case(2.0, 1.1)]
    losers = holdout.fit(train)
    assert losers == pytest.approx(1.52)  # 1.5 x 1.01, rounded up
    assert not holdout.runs_fused(train[0], losers) and holdout.runs_fused(train[1], losers)
    error = holdout.fit(train, "error")  # the largest ratio / speedup: 1.5 / 0.9, 2.0 / 1.2, 1.1 / 2.0
    assert error == pytest.approx(1.69)
    assert holdout.judge(train, error).losses == () and holdout.judge(train, error).forfeited == (2.0,)
    assert holdout.fit_margin(train, 1.5) == pytest.approx(2.54)  # 1.69 x 1.5, rounded up
    assert holdout.fit([_case(1.5, 2.0)]) == 1.0  # nothing lost: the estimate alone
    with pytest.raises(InputError, match="fit rule"):
        holdout.fit(train, "median")


def test_the_margin_is_learned_from_the_other_ops_when_one_is_judged():
    """An op whose held-out error jumps (size 8192: error 3 against 1.5) sets the margin for the
    others, not for itself."""
    jumpy = [_case(1.0, 3.0 if s == 8192 else 1.5, kernel="gemm_rs", size=s) for s in (2048, 4096, 8192)]
    calm = [_case(1.0, 1.2, kernel="gemm_ar", size=s) for s in (2048, 4096, 8192)]
    cases = jumpy + calm
    assert holdout.held_out_margin(cases) == pytest.approx(2.0)  # 3.0 / 1.5
    assert holdout.held_out_margin(cases, exclude="gemm_rs") == pytest.approx(1.0)
    assert holdout.held_out_margin(cases, exclude="gemm_ar") == pytest.approx(2.0)


def test_a_results_folder_without_estimates_is_one_clear_error(tmp_path):
    (tmp_path / "results.jsonl").write_text((DATA / "results.jsonl").read_text())
    with pytest.raises(InputError, match="no estimate for 252 points"):
        holdout.load_cases(tmp_path)


def test_a_study_point_without_its_auto_twin_is_one_clear_error(tmp_path):
    lines = (DATA / "results.jsonl").read_text().splitlines()
    (tmp_path / "results.jsonl").write_text("\n".join(l for l in lines if "schedule=auto" not in l) + "\n")
    with pytest.raises(InputError, match="lack their auto or forced-fused twin"):
        autopick.pairs(tmp_path)
