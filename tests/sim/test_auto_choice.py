"""``auto``'s choice (mkernel/builders/_auto.py, decided in mkernel/runner.py): with the simulator it
runs the faster of the two schedules as the simulator times them, on a seeded slice of the scale-out
study's points; a sim run simulates each schedule once; the schedules a hw run builds (flat, whole,
with library tasks) are chosen alike; and without a simulator the estimate rule decides. The oracle
is the forced runs' own simulated times."""
from __future__ import annotations

import dataclasses
import random

import pytest

from mkernel import runner
from mkernel.builders import _auto as auto
from mkernel.errors import BackendUnavailable
from mkernel.scenario import load_scenario
from mkernel.sim.backend import SimBackend
from mkernel.studies import study, sweep


def _scenario(point, schedule: str):
    sc = sweep.scenario_of(point)
    return dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, schedule=schedule))


def _slice(n: int = 5) -> list:
    """A seeded sample of the study's 2- and 4-node points, every op among them."""
    points = [p for p in study.auto_points() if dict(p.options)["schedule"] == "auto"
              and p.testbed.endswith(("-2x8", "-4x8"))]
    rng = random.Random(31)
    picked = {p.kernel: p for p in rng.sample(points, len(points))}  # one per op, seeded
    return sorted(picked.values(), key=lambda p: p.key)[:n]


@pytest.mark.parametrize("point", _slice(), ids=lambda p: p.key)
def test_auto_runs_the_faster_schedule_as_simulated(point):
    fused, _ = runner.run(_scenario(point, "fused"), backend="sim", collapse=True)
    got, _ = runner.run(_scenario(point, "auto"), backend="sim", collapse=True)
    f, b = fused["time_s"], fused["baseline"]["time_s"]
    assert got["schedule"] == ("fused" if f <= b else "baseline"), (f, b)
    assert got["time_s"] == pytest.approx(min(f, b), rel=1e-9)
    assert got["time_s"] <= got["baseline"]["time_s"] * (1 + 1e-9)


def test_a_sim_run_simulates_each_schedule_once(monkeypatch):
    """auto's two simulations are the run's: a chosen baseline or fused run adds none."""
    calls = []
    real = SimBackend.run

    def counted(self, schedule, cluster, **kw):
        calls.append(schedule.variant)
        return real(self, schedule, cluster, **kw)

    monkeypatch.setattr(SimBackend, "run", counted)
    sc = load_scenario("paper-ib-2x8")
    for m, schedule in ((1024, "auto"), (8192, "auto"), (8192, "fused")):
        calls.clear()
        w = dataclasses.replace(sc.workload, m=m, n=m, k=64 if m == 1024 else 512, schedule=schedule)
        result, _ = runner.run(dataclasses.replace(sc, workload=w), backend="sim")
        assert sorted(calls) == sorted(["fused", result["baseline"]["name"]]), (m, schedule, calls)


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
