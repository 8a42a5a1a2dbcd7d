"""The array path (``Model(arrays=True)``: the lanes' steps at one instant batched, sim/environment.py
``Streak``) against the same model with it off, which queues every lane's timer on its own.

The two must be the same run: every check and landing the hazard tracker logs (entry, members,
time, in log order), each rank's end, the hazards found, the link bytes and the event count. The
schedules are a seeded sample of the golden cases (every op; one to three nodes, so puts start
generators between one step's lane timers and split streaks), fused and baseline, wider groups
(4096^2 on 4-8 GPUs: many members a lane), and copies with guarding waits dropped, so that hazards
are found and compared too.
"""
from __future__ import annotations

import dataclasses
import itertools
import random

import pytest

from harness import golden_schedules as golden
from mkernel import BufferKind, Cluster, Op, Region, Role, ScheduleBuilder, Signal, Wait, builders
from mkernel.scenario import load_scenario
from mkernel.errors import DeadlockError
from mkernel.sim import environment
from mkernel.sim.engine import Model
from mkernel.sim.hazardlog import LoggedTracker, _as_rows
from test_hazardlog import GUARDS

SAMPLE = 20  # golden cases drawn (seeded)


class _Kept(LoggedTracker):
    """The logged tracker, keeping its log's rows and the ranks' ends for the comparison."""

    def finish(self) -> None:
        self.kept = (_as_rows(*self._calls()).tolist(), list(self.log.ends))
        super().finish()


def _weakened(s, rng: random.Random):
    """``s`` with a third of its guarding waits (test_hazardlog's) dropped: the reads they guarded may come early."""
    drop = {t.id for t in s.tasks
            if t.waits and any(g in t.waits[-1].signal.name for g in GUARDS) and rng.random() < 0.3}
    return dataclasses.replace(s, tasks=tuple(dataclasses.replace(t, waits=t.waits[:-1]) if t.id in drop else t
                                              for t in s.tasks))


def _handmade():
    """Two ranks whose intra SMs take, at the launch, a task whose signal a compute NOP taken just before
    bumps as it starts (the wait holds by the time the run would block: it must start at once), and two
    tasks waiting on one key for 2 and for 1 bumps (a key with two waiters), bumped by two local copies
    ending at one instant, on both ranks at once (lanes in lockstep)."""
    sb = ScheduleBuilder("handmade", "fused", world=2, gpus_per_node=2, num_sms=8)
    sb.buffer("X", 64, 64, kind=BufferKind.INPUT)
    sb.buffer("Y", 64, 64)
    sb.launch("k", {Role.COMPUTE: 2, Role.INTRA: 2})
    for r in range(2):
        sb.add(r, Role.COMPUTE, Op.NOP, signals=(Signal(r, "go"),), label="go")
        for half in (0, 32):
            sb.add(r, Role.COMPUTE, Op.COPY, reads=(Region("X", r, half, half + 32, 0, 64),),
                   writes=(Region("Y", r, half, half + 32, 0, 64),), signals=(Signal(r, "late"),), label="copy")
        sb.add(r, Role.INTRA, Op.NOP, waits=(Wait(Signal(r, "go"), 1),), label="after go")
        sb.add(r, Role.INTRA, Op.NOP, waits=(Wait(Signal(r, "late"), 2),), label="after both")
        sb.add(r, Role.INTRA, Op.NOP, waits=(Wait(Signal(r, "late"), 1),), label="after one")
    return sb.build(0.0)


def _cases():
    rng = random.Random(30)
    yield "handmade", _handmade(), Cluster("1x2", nodes=1, gpus_per_node=2)
    cases = [case for case in golden.cases() if case[2].world > 1 and not case[3]]  # (a first_nodes build folds)
    sc = load_scenario("paper-ib-2x8")
    for (nodes, gpus), kernel in itertools.product(((1, 4), (2, 2), (2, 4)), ("gemm_ar", "gemm_rs", "ag_gemm")):
        c = dataclasses.replace(sc.cluster, nodes=nodes, gpus_per_node=gpus)  # wide groups: many members a lane
        fused = builders.get(kernel).build(dataclasses.replace(sc.workload, kernel=kernel, m=4096, n=4096, k=256), c,
                                           grouped=True)
        yield f"{kernel}/{nodes}x{gpus}/4096", fused, c
        yield f"{kernel}/{nodes}x{gpus}/4096/weakened", _weakened(fused, rng), c
    for name, w, c, first in sorted(rng.sample(cases, SAMPLE)):
        fused, baseline = golden.build_pair_grouped(w, c, first)
        yield f"{name}/fused", fused, c
        yield f"{name}/baseline", baseline, c
        yield f"{name}/weakened", _weakened(fused, rng), c


def run(s, c, arrays: bool) -> tuple:
    """Everything of a run that the two paths must agree on."""
    model = Model(s, c, None, arrays=arrays, tracker=_Kept)
    tracker = model.tracker
    try:
        model.run()
    except DeadlockError as exc:  # (a dropped wait may let a counter pass its count: a wait then never holds)
        return str(exc), model.env.events
    links = [(r, link.name, link.bytes, link.busy_bytes) for r, link in model.all_links()]
    return (tracker.kept, [repr(h) for h in tracker.hazards], model.finish, links, model.env.events)


@pytest.fixture
def streaks(monkeypatch):
    """Counts the streaks the array path queues and the times the loop takes one up (more: some split)."""
    seen = {"made": 0, "taken": 0}
    make, take = environment.Streak.__init__, environment.CountingEnvironment._slots

    def made(self, *a):
        seen["made"] += 1
        make(self, *a)

    def taken(self, *a):
        seen["taken"] += 1
        take(self, *a)

    monkeypatch.setattr(environment.Streak, "__init__", made)
    monkeypatch.setattr(environment.CountingEnvironment, "_slots", taken)
    return seen


@pytest.mark.python_core
def test_the_array_path_is_the_run_of_one_timer_a_lane(streaks):
    hazards = 0
    for name, s, c in _cases():
        on, off = run(s, c, True), run(s, c, False)
        if len(on) == 2:
            assert on == off, name
            continue
        for part, a, b in zip(("log", "hazards", "finish", "links", "events"), on, off):
            assert a == b, f"{name}: {part}"
        hazards += bool(on[1])
    assert hazards  # the weakened copies found some, on both paths alike
    assert streaks["taken"] > streaks["made"] > 0  # streaks were split (a generator started between lanes)
