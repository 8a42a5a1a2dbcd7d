"""CountingEnvironment.run keeps the entries it has run for the calls queued next (sim/environment.py): a call
queued from a callback takes the entry that callback came in. Its loop must still make SimPy's calls, with
their arguments, in SimPy's order (its step() takes no entry back: the oracle), and hold nothing it has run."""
from __future__ import annotations

import random

import pytest
import simpy

from mkernel.sim.environment import CountingEnvironment


def _chains(env: CountingEnvironment, log: list, seed: int) -> None:
    """Chains of calls, each queuing the next (plain calls every way, streak slots, Timeouts) with an
    argument of its own, on a grid of times that tie."""
    rng = random.Random(seed)

    def link(arg: tuple) -> None:
        name, left = arg
        log.append((env.now, name, left))
        if not left:
            return
        nxt, how = (name, left - 1), rng.randrange(5)
        if how == 0:
            env.call_later(rng.randrange(3) * 0.5, link, nxt)
        elif how == 1:
            env.call_at(env.now + rng.randrange(2), link, nxt)
        elif how == 2:
            env.call_first(link, nxt)
        elif how == 3:
            when = env.now + 1.0
            env.call_in_streak(("chain", when), when, link, nxt)
        else:
            env.timeout(rng.randrange(2)).callbacks.append(lambda _event, a=nxt: link(a))

    for c in range(rng.randrange(2, 6)):
        env.call_later(rng.randrange(3) * 0.5, link, (f"c{c}", rng.randrange(4, 12)))


@pytest.mark.parametrize("seed", range(30))
def test_calls_queued_in_the_entries_run_are_simpys(seed):
    logs, ends = [], []
    for by_steps in (False, True):
        env, log = CountingEnvironment(), []
        _chains(env, log, seed)
        if by_steps:
            simpy.Environment.run(env)  # SimPy's loop: env.step() until the queue is empty
        else:
            env.run()
            assert env._free and all(e.item is None and e.arg is None for e in env._free)  # reused, holding nothing
        logs.append(log)
        ends.append((env.events, env.now))
    assert logs[0] == logs[1] and ends[0] == ends[1]
