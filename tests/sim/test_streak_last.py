"""CountingEnvironment.call_in_streak tries the streak it found or made last before its dict of pending
streaks (sim/environment.py): the calls it queues must run as the same calls queued one by one with
call_at do, in order, and as many events, where keys interleave, a streak gets slots while it runs,
and a key is asked for again at its own instant after its streak has run its last slot (a lane
released at an instant whose resume streak is done: Dispatch._released's key). Planted error tried:
not dropping the last streak when its last slot has run (the later slot joins a streak that is gone,
and never runs: fails here)."""
from __future__ import annotations

import random

import pytest

from mkernel.sim.environment import CountingEnvironment


def _scene(env: CountingEnvironment, log: list, seed: int, streaks: bool) -> None:
    """Callbacks that queue calls under a few keys at this instant and the next ones, seeded."""
    rng = random.Random(seed)

    def slot(arg: tuple) -> None:
        tag, left = arg
        log.append((env.now, tag, left))
        for _ in range(rng.randrange(3) if left else 0):
            when = env.now + rng.choice((0.0, 0.0, 0.5, 1.0))
            add(rng.choice("abc"), when, (rng.choice("xyz"), left - 1))
        if left and rng.random() < 0.3:
            env.call_at(env.now, plain, (tag, left - 1))

    def plain(arg: tuple) -> None:  # (a call between slots of an instant: it asks for a key of this instant)
        log.append((env.now, "plain"))
        add(rng.choice("abc"), env.now, arg)

    def add(name: str, when: float, arg: tuple) -> None:
        if streaks:
            env.call_in_streak((name, when), when, slot, arg)
        else:
            env.call_at(when, slot, arg)

    for i in range(rng.randrange(2, 6)):
        add(rng.choice("ab"), rng.choice((0.0, 0.5)), (f"s{i}", rng.randrange(3, 7)))


@pytest.mark.parametrize("seed", range(40))
def test_streak_slots_run_as_calls_queued_one_by_one(seed):
    logs, ends = [], []
    for streaks in (True, False):
        env, log = CountingEnvironment(), []
        _scene(env, log, seed, streaks)
        env.run()
        logs.append(log)
        ends.append((env.events, env.now))
    assert logs[0] == logs[1] and ends[0] == ends[1]


def test_a_key_asked_for_again_after_its_streak_ran_gets_a_new_streak():
    """The case the planted error misses elsewhere, by hand: slot 'a' at t=0 runs, its streak is done,
    then a call at t=0 asks for the same key: its slot must run."""
    env, log = CountingEnvironment(), []

    def slot(arg):
        log.append(arg)

    env.call_in_streak(("k", 0.0), 0.0, slot, "a")
    env.call_at(0.0, lambda _a: env.call_in_streak(("k", 0.0), 0.0, slot, "b"))
    env.run()
    assert log == ["a", "b"] and env.events == 4
