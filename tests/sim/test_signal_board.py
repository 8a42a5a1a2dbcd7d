"""SignalBoard (one Cell per key) against the board it replaced, kept here as the
oracle: a dict of counts and a dict of waiter lists, each key bumped one count at a time. Seeded random
sequences of waits and bumps (single keys, lists with repeated keys, ``times`` > 1, lists repeated
with and without waiters on them, a folded run's rank map, counts of 0) must release the same
waiters in the same order and leave the same counts, and ``wait_key`` must answer the same."""
from __future__ import annotations

import random

import pytest

from mkernel import BufferKind, Cluster, Op, Region, Role, ScheduleBuilder, Signal, Wait
from mkernel.ir import Step, expand
from mkernel.sim.engine import Model
from mkernel.sim.signals import SignalBoard, key_of


class _Oracle:
    """The plain board: every bump of a list ``repeat`` times over and ``times`` times a key is done
    one count at a time, in order, releasing each waiter whose count the key reaches then (in the
    order they waited)."""

    def __init__(self, release, home) -> None:
        self.release, self.home = release, home
        self.values: dict[tuple, int] = {}
        self.waiters: dict[tuple, list] = {}

    def bump_keys(self, keys, times=1, repeat=1) -> None:
        if self.home is not None:
            keys = [(self.home[k[0]], k[1], k[2]) for k in keys]
        for key in keys * repeat:
            for _ in range(times):
                value = self.values[key] = self.values.get(key, 0) + 1
                waiting = self.waiters.get(key, [])
                for need, waiter in [w for w in waiting if w[0] <= value]:
                    waiting.remove((need, waiter))
                    self.release(waiter)

    def wait_key(self, key, need, waiter) -> bool:
        if self.values.get(key, 0) >= need:
            return False
        self.waiters.setdefault(key, []).append((need, waiter))
        return True


def _steps(rng: random.Random) -> list[tuple]:
    ranks = 4
    keys = [(r, name, i) for r in range(ranks) for name in ("a", "b") for i in range(2)]
    steps = []
    for n in range(rng.randint(20, 120)):
        if rng.random() < 0.4:
            steps.append(("wait", rng.choice(keys), rng.randint(0, 6), f"w{n}"))
        else:
            listed = [rng.choice(keys) for _ in range(rng.randint(0, 4))]
            steps.append(("bump", listed, rng.choice((1, 1, 2, 3)), rng.choice((1, 1, 2, 4))))
    return steps


def test_the_board_releases_and_counts_as_one_count_at_a_time():
    released = together = 0
    for seed in range(60):
        rng = random.Random(seed)
        home = [r - r % 2 for r in range(4)] if seed % 3 == 0 else None  # every third: a folded run's map
        got, want = [], []
        board, oracle = SignalBoard(1, got.append, home), _Oracle(want.append, home)
        for step in _steps(rng):
            if step[0] == "wait":
                _, key, need, name = step
                key = (home[key[0]], key[1], key[2]) if home else key  # (the model waits on base keys)
                assert board.wait_key(key_of(*key), need, name) == oracle.wait_key(key, need, name), (seed, step)
            else:
                _, keys, times, repeat = step
                before = len(want)
                board.bump_keys([key_of(*key) for key in keys], times, repeat)
                oracle.bump_keys(keys, times, repeat)
                together += len(want) - before > 1
            assert got == want, (seed, step)
        for key in set(oracle.values) | set(oracle.waiters):
            assert board.count(Signal(*key)) == oracle.values.get(key, 0), (seed, key)
        released += len(got)
    assert released > 300 and together > 30  # (waiters released, often several by one bump)


def _spanning():
    """Three GEMM groups of one shape on one rank, taken by more compute SMs than a group has members,
    so a run spans them (dispatch.Run.parts): the first bumps a stepping signal (each key once), the
    second one fixed signal (its members' bumps: 3 of one key) and the third two fixed signals (the
    list 3 times over); NOPs wait for each count, and for one more than the fixed signals reach
    before the last group (a key bumped short would leave one waiting)."""
    sb = ScheduleBuilder("spans", "fused", world=1, gpus_per_node=1, num_sms=16, grouped=True)
    sb.buffer("A", 256, 64, kind=BufferKind.INPUT)
    sb.buffer("B", 64, 64, kind=BufferKind.INPUT)
    sb.buffer("C", 256, 64)
    sb.launch("k", {Role.COMPUTE: 12, Role.INTRA: 4})
    moves = ((0, 16, 0), (0, 0, 0), (0, 16, 0))
    fixed = {"a": ((Signal(0, "a"),), ((0, 1),)), "b": ((Signal(0, "b"),), ((0, 0),)),
             "c": ((Signal(0, "c"), Signal(0, "d")), ((0, 0), (0, 0)))}
    for g, (name, (signals, steps)) in enumerate(fixed.items()):
        row = 48 * g
        sb.add(0, Role.COMPUTE, Op.GEMM, reads=(Region("A", 0, row, row + 16, 0, 64), Region("B", 0, 0, 64, 0, 64)),
               writes=(Region("C", 0, row, row + 16, 0, 64),), signals=signals, label=f"{name} {{}}", count=3,
               step=Step(moves, steps if name == "a" else (), label=(0, 1)))
    for key, need in (("a", 1), ("b", 3), ("c", 3), ("d", 3), ("b", 4)):
        sb.add(0, Role.INTRA, Op.NOP, waits=(Wait(Signal(0, key), need),), label=f"after {key} {need}")
    sb.add(0, Role.COMPUTE, Op.NOP, signals=(Signal(0, "b"),), label="last b")
    return sb.build(0.0)


@pytest.mark.python_core
def test_a_run_spanning_entries_bumps_each_entrys_signals_as_its_members_would():
    """The run's bumps go in as few calls as they can (engine._signal joins lists of single bumps):
    a quiet run, whose GEMM runs span the three groups, must end each task as the tracked run of the
    expansion (one member a task) does, and must not deadlock."""
    s = _spanning()
    c = Cluster("1x1", nodes=1, gpus_per_node=1)
    quiet, flat = Model(s, c, None, track_hazards=False), Model(expand(s), c, None, track_hazards=True)
    spans = []
    signal = quiet._signal

    def seen(run, paid):
        spans.append(len(run.parts or ()))
        signal(run, paid)

    quiet._signal = seen
    quiet.run()
    flat.run()
    assert max(spans) == 3  # (one run held the three groups)
    assert quiet.finish == flat.finish and quiet.compute_busy == flat.compute_busy
