"""``auto``'s choice (mkernel/builders/_auto.py, decided in mkernel/runner.py): with the simulator it
runs the fastest schedule as the simulator times them (the baseline, or the fused one under each
inter-node algorithm the op has), on a seeded slice of the scale-out
study's points; a sim run simulates each schedule once; the schedules a hw run builds (flat, whole,
with library tasks) are chosen alike; and without a simulator the estimate rule decides. The oracle
is the forced runs' own simulated times."""
from __future__ import annotations

import dataclasses
import random

import pytest

from mkernel import runner
from mkernel.builders import _auto as auto
from mkernel.builders import _rail as rail
from mkernel.errors import BackendUnavailable
from mkernel.scenario import load_scenario
from mkernel.sim.backend import SimBackend
from mkernel.studies import study, sweep


def _scenario(point, schedule: str):
    sc = sweep.scenario_of(point)
    return dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, schedule=schedule))


# a study point the baseline wins by far (0.49x in docs/results/auto-2026-12-04): the seeded sample's
# baseline pick was a MoE point until the 2026-12-05 MoE builder made it a fused win (1.76x)
BASELINE_WINS = "scaleout/ib-400g-rail-2x8/ring_attention/512/schedule=auto"


def _slice(n: int = 5) -> list:
    """A seeded sample of the study's 2- and 4-node points, every op among them, and BASELINE_WINS,
    so that both picks are exercised."""
    points = [p for p in study.auto_points() if dict(p.options)["schedule"] == "auto"
              and p.testbed.endswith(("-2x8", "-4x8"))]
    rng = random.Random(31)
    picked = {p.kernel: p for p in rng.sample(points, len(points))}  # one per op, seeded
    return sorted(picked.values(), key=lambda p: p.key)[:n] + [p for p in points if p.key == BASELINE_WINS]


def _forced(point, **fields) -> dict:
    sc = _scenario(point, "fused")
    sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, **fields))
    return runner.run(sc, backend="sim", collapse=True)[0]


@pytest.mark.parametrize("point", _slice(), ids=lambda p: p.key)
def test_auto_runs_the_fastest_schedule_as_simulated(point):
    """The oracle: every schedule auto may run, forced and simulated: each inter-node algorithm the op
    has (on several nodes) and the baseline."""
    sc = _scenario(point, "fused")
    algs = rail.ALGORITHMS.get(sc.workload.kernel, ("auto",)) if sc.cluster.nodes > 1 else ("auto",)
    forced = {a: _forced(point, internode=a) for a in algs}
    f = min(r["time_s"] for r in forced.values())
    b = next(iter(forced.values()))["baseline"]["time_s"]
    got, _ = runner.run(_scenario(point, "auto"), backend="sim", collapse=True)
    assert got["schedule"] == ("fused" if f <= b else "baseline"), (f, b)
    assert got["time_s"] == pytest.approx(min(f, b), rel=1e-9)
    assert got["time_s"] <= got["baseline"]["time_s"] * (1 + 1e-9)
    if got["schedule"] == "fused" and len(algs) > 1:  # the result names the algorithm that ran
        assert forced[got["internode"]]["time_s"] == pytest.approx(f, rel=1e-9)


def test_auto_takes_a_faster_algorithm_than_the_rule():
    """At 2 x 8, M = 2048 the rule sends GEMM+AR's sums directly; a grouped exchange simulates faster
    (docs/scaling.md, 2026-12-04), and auto runs it."""
    point = next(p for p in study.auto_points() if dict(p.options)["schedule"] == "auto" and p.kernel == "gemm_ar"
                 and p.testbed.endswith("ib-400g-rail-2x8") and p.size == 2048)
    sc = _scenario(point, "auto")
    rule = rail.choose(sc.workload, sc.cluster)
    ruled = _forced(point, internode=rule)
    got, _ = runner.run(sc, backend="sim", collapse=True)
    assert got["internode"] != rule and got["time_s"] < ruled["time_s"], (rule, got["internode"])


def test_a_sim_run_simulates_each_schedule_once(monkeypatch):
    """auto's simulations are the run's: a chosen baseline or fused run adds none, and no schedule is
    simulated twice; a fused schedule per inter-node algorithm where auto chooses it."""
    calls = []
    real = SimBackend.run

    def counted(self, schedule, cluster, **kw):
        calls.append(schedule)
        return real(self, schedule, cluster, **kw)

    monkeypatch.setattr(SimBackend, "run", counted)
    sc = load_scenario("paper-ib-2x8")
    for m, schedule in ((1024, "auto"), (8192, "auto"), (8192, "fused")):
        calls.clear()
        w = dataclasses.replace(sc.workload, m=m, n=m, k=64 if m == 1024 else 512, schedule=schedule)
        result, _ = runner.run(dataclasses.replace(sc, workload=w), backend="sim")
        assert len({id(s) for s in calls}) == len(calls), (m, schedule)
        variants = [s.variant for s in calls]
        assert variants.count(result["baseline"]["name"]) == 1, (m, schedule, variants)
        fused = variants.count("fused")
        assert fused == len(rail.ALGORITHMS[w.kernel]) if schedule == "auto" else fused == 1, (m, schedule, variants)


def test_the_schedules_a_hw_run_builds_are_chosen_as_the_sim_run_chooses():
    """The hw backend builds flat, whole schedules with library tasks; auto simulates those and picks
    what the sim run's grouped, collapsed timing builds pick (at a point of each pick)."""
    picks = set()
    for point in (p for p in _slice() if p.testbed.endswith("-2x8")):
        sc = _scenario(point, "auto")
        timing = runner.chosen(*runner.build(sc, folded=True, grouped=True, timing=True))
        assert runner.chosen(*runner.build(sc)) == timing, point.key
        picks.add(timing)
    assert picks == {"fused", "baseline"}


def test_without_a_simulator_the_estimate_rule_decides(monkeypatch):
    """A point where the fused schedule wins in the simulator but not by the estimate's held-out
    margin: auto runs it fused with the simulator, the baseline without."""
    sc = load_scenario("paper-ib-2x8")
    sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, m=8192, n=8192, k=512, schedule="auto"))
    fused, baseline = runner.build(dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, schedule="fused")),
                                   folded=True, grouped=True, timing=True)
    f, b = auto.estimate_us(fused, sc.cluster), auto.estimate_us(baseline, sc.cluster)
    assert f <= b < f * auto.FALLBACK_SLACK["gemm_ar"]  # the estimates alone cannot tell
    assert runner.chosen(*runner.build(sc, folded=True, grouped=True, timing=True)) == "fused"

    def missing(name):
        raise BackendUnavailable(f"backend {name!r} needs a package that is not installed: simpy")
    monkeypatch.setattr(runner, "get_backend", missing)
    assert runner.chosen(*runner.build(sc, folded=True, grouped=True, timing=True)) == "baseline"
