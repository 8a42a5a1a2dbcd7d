"""CountingEnvironment.run: its own loop (no step call per event) does what SimPy's loop of
``step()`` does: the same calls, at the same times, in the same order, the same failures, and the
same event count (SimPy's loop counts the step that finds the queue empty)."""
from __future__ import annotations

import pytest
import simpy

from mkernel.sim.environment import CountingEnvironment


def _scene(env: CountingEnvironment, log: list) -> None:
    """Plain calls, Timeouts with callbacks, processes waiting on numbers and events (pending,
    processed, failed and defused), ties at one instant of every priority."""
    def note(name):
        return lambda _arg: log.append((env.now, name))

    gate = env.event()

    def waiter(name, delay):
        yield delay
        log.append((env.now, name + " woke"))
        value = yield gate
        log.append((env.now, f"{name} passed {value}"))
        try:
            yield bad
        except ValueError as exc:
            log.append((env.now, f"{name} caught {exc}"))
        yield 0.0
        log.append((env.now, name + " done"))

    bad = env.event()
    for i in range(3):
        env.call_later(1.0, note(f"call {i}"))
        env.timeout(1.0).callbacks.append(note(f"timeout {i}"))
        env.start(waiter(f"w{i}", 0.5 * i))
    env.call_at(2.0, lambda _a: gate.succeed("open"))
    env.call_at(2.0, lambda _a: env.call_later(0.0, note("nested")))
    env.call_at(3.0, lambda _a: bad.fail(ValueError("late")))
    env.call_at(3.0, lambda _a: env.call_at(3.0, note("same instant")))


def _by_steps(env: CountingEnvironment) -> None:
    simpy.Environment.run(env)  # SimPy's loop: env.step() until the queue is empty


def test_the_loop_makes_the_calls_of_simpy_steps():
    logs, counts = [], []
    for run in (CountingEnvironment.run, _by_steps):
        env, log = CountingEnvironment(), []
        _scene(env, log)
        run(env)
        logs.append(log)
        counts.append((env.events, env.now))
    assert logs[0] == logs[1] and len(logs[0]) == 20
    assert counts[0] == counts[1] == (24, 3.0)


def test_a_failure_nothing_defuses_ends_both_loops_alike():
    outcomes = []
    for run in (CountingEnvironment.run, _by_steps):
        env, log = CountingEnvironment(), []
        env.call_later(1.0, lambda _a: log.append(env.now))
        env.call_later(2.0, lambda _a: env.event().fail(KeyError("lost")))
        env.call_later(3.0, lambda _a: log.append(env.now))
        with pytest.raises(KeyError, match="lost"):
            run(env)
        outcomes.append((log, env.events, env.now))
    assert outcomes[0] == outcomes[1] == ([1.0], 3, 2.0)


def test_until_is_simpys():
    env, log = CountingEnvironment(), []
    for t in (1.0, 2.0, 3.0):
        env.call_at(t, lambda _a: log.append(env.now))
    env.run(until=2.5)
    assert log == [1.0, 2.0] and env.now == 2.5


def _until_scene(env, log: list, case: str):
    """Timeouts and a process on ``env`` (SimPy's or ours), and the ``until`` of ``case``."""
    def proc():
        yield env.timeout(1.5)
        log.append(("proc", float(env.now)))
        return "done"

    for t in (1.0, 2.0, 3.0):
        env.timeout(t).callbacks.append(lambda ev, t=t: log.append(("timeout", t)))
    p = env.process(proc())
    if case == "pending":
        return p
    if case == "failed":
        bad = env.event()
        env.timeout(2.5).callbacks.append(lambda ev: bad.fail(KeyError("until failed")))
        return bad
    if case == "never":
        return env.event()
    return {"time": 2.5, "past": 0.0}[case]


@pytest.mark.parametrize("case", ["pending", "processed", "failed", "never", "time", "past"])
def test_run_until_is_simpys(case):
    """``run(until)`` (an event pending, processed already or failed, one never triggered, a time, a
    time not ahead) against simpy.Environment's on the same scene: the same log, value, time and error."""
    outcomes = []
    for make in (simpy.Environment, CountingEnvironment):
        env, log = make(), []
        until = _until_scene(env, log, "pending" if case == "processed" else case)
        if case == "processed":  # (p ended at 1.5: run past it first)
            env.run(2.6)
            log.append("again")
        try:
            got = ("value", env.run(until))
        except (KeyError, RuntimeError, ValueError) as e:
            got = (type(e).__name__, str(e).replace(repr(until), "UNTIL"))
        outcomes.append((log, got, float(env.now)))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][1][0] == {"pending": "value", "processed": "value", "failed": "KeyError", "never": "RuntimeError",
                                 "time": "value", "past": "ValueError"}[case]


def _streak_scene(env: CountingEnvironment, log: list, streaks: bool) -> None:
    """Four lanes' timers of one step at t=1 and t=2 (as streak slots, or one call_at each), between
    them plain calls at t=1, a process started from a slot (URGENT: it runs before the
    next lane's slot), a slot added to a streak while it runs, and due_now read from inside a slot."""
    def gen(name):
        log.append((env.now, name + " started"))
        yield 0.0
        log.append((env.now, name + " resumed"))

    def lane(arg):
        log.append((env.now, arg, env.due_now()))
        if arg == ("t1", 1):
            env.start(gen("put"))
            env.call_at(env.now, lambda _a: log.append((env.now, "after")))
        if arg == ("t1", 2):  # another slot of this step and time, queued now
            add("t1", 1.0, 9)

    def add(tag, when, i):
        if streaks:
            env.call_in_streak((tag, when), when, lane, (tag, i))
        else:
            env.call_at(when, lane, (tag, i))

    for i in range(4):
        add("t1", 1.0, i)
        env.call_at(1.0, lambda _a, i=i: log.append((env.now, "plain", i)))
        add("t2", 2.0, i)
    env.call_at(3.0, lambda _a: log.append((env.now, "plain late")))  # (at t=2 only the streak is due)


@pytest.mark.parametrize("loop", [CountingEnvironment.run, _by_steps], ids=["loop", "steps"])
def test_streak_slots_run_as_one_timer_each(loop):
    logs, counts = [], []
    for streaks in (True, False):
        env, log = CountingEnvironment(), []
        _streak_scene(env, log, streaks)
        loop(env)
        logs.append(log)
        counts.append((env.events, env.now))
    assert logs[0] == logs[1] and len(logs[0]) == 17
    assert counts[0] == counts[1] == (18, 3.0)
    assert [x[2] for x in logs[0] if x[1][0] == "t2"] == [True, True, True, False]
    assert [x for x in logs[0] if x[1] in ("put started", "after")] == [(1.0, "put started"), (1.0, "after")]


@pytest.mark.parametrize("seed", range(5))
def test_the_queue_pops_entries_in_time_then_order(seed):
    """The queue's heap (sim/environment.py) against a sort: random times with many ties, orders
    of every priority, pushes and pops interleaved; each pop is the least (when, order) left."""
    import random

    from mkernel.sim.environment import ORDER, Entry, pop, push

    rng, heap, left, got, want = random.Random(seed), [], [], [], []
    for eid in range(600):
        entry = Entry(float(rng.randrange(40)) / 4, rng.choice((-1, 0, 1)) * ORDER + eid, eid)
        push(heap, entry)
        left.append((entry.when, entry.order, eid))
        if rng.random() < 0.4:
            got.append(pop(heap).item)
            left.sort()
            want.append(left.pop(0)[2])
    while heap:
        got.append(pop(heap).item)
    assert got == want + [eid for _, _, eid in sorted(left)]
