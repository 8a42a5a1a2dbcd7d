"""The signal path's shortcuts against the plain rules they stand for: a run's bumps split into those
made now and the flags stored to peers (``signals.run_bumps``, with its split of a cycling flag by
arithmetic), and the board's least-need shortcut (a bump compared with the least count its key's
waiters need, not with each waiter)."""
from __future__ import annotations

import random

import pytest

from mkernel.ir import Op, Role, Signal, Step, Task
from mkernel.sim.signals import SignalBoard, key_of, run_bumps


def _group(rng: random.Random, tid: int) -> Task:
    """A group of random size whose signals step in one of flat_keys' ways: cycling (one signal or
    two, with or without a rotation), stepping, or fixed."""
    count = rng.choice([2, 3, 5, 8, 12, 16, 24])
    kind = rng.choice(["cycle", "cycle", "cycle2", "step", "fixed"])
    nsig = 2 if kind == "cycle2" or kind == "fixed" and rng.random() < 0.5 else 1
    signals = tuple(Signal(rng.randrange(4), f"s{k}", rng.randrange(10)) for k in range(nsig))
    moves = tuple((rng.choice([0, 1, 2, -1]), rng.choice([0, 1, 3])) for _ in range(nsig))
    if kind.startswith("cycle"):
        period = rng.choice([p for p in (2, 3, 4, 8) if count % p == 0] or [count])
        rotate = rng.choice([0, 0] + list(range(1, period)))
        outer = tuple((rng.choice([0, 0, 1]), rng.choice([0, period])) for _ in range(nsig))
        step = Step(signals=moves, period=period, outer=outer, rotate=rotate)
    elif kind == "step":
        step = Step(signals=moves, rotate=rng.choice([0, 0, 1]) if count > 2 else 0)
    else:
        step = Step()
    return Task(tid, signals[0].rank, Role.COMPUTE, Op.GEMM, signals=signals, count=count, step=step)


def _expanded(bumps: list[list]) -> list[int]:
    """A list of [keys, times, repeat] as the keys bumped one at a time."""
    return [key for keys, times, repeat in bumps for key in keys * repeat for _ in range(times)]


def test_a_runs_bumps_are_its_members_signals_split_by_rank_in_order():
    """``run_bumps`` of random runs (one to three entries, random spans, random ranks) against the
    members' own signals (``Task.member_signals``), member by member: those of the run's rank now,
    the rest later, each in order. Planted error tried: the cycling split taking the member at
    ``mine[lo]`` for every local member (fails here)."""
    rng = random.Random(7)
    for case in range(3000):
        entries = []
        for k in range(rng.choice([1, 1, 2, 3])):
            t = _group(rng, 100 * case + k)
            first = rng.randrange(t.count)
            entries.append((t, first, rng.randint(1, t.count - first)))
        rank = rng.randrange(4)
        signals = [g for t, first, n in entries for i in range(first, first + n) for g in t.member_signals(i)]
        now, later = run_bumps(entries, rank)
        want_now = [key_of(g.rank, g.name, g.index) for g in signals if g.rank == rank]
        want_later = [key_of(g.rank, g.name, g.index) for g in signals if g.rank != rank]
        assert _expanded(now) == want_now and _expanded(later) == want_later, (case, entries, rank)


def test_the_least_need_shortcut_releases_as_each_waiter_compared():
    """Waiters of one key with needs 5, 3, 4 (in that order) and bumps of one: each released at the
    bump that reaches its count, the least need moving on to the waiters left; then a bump of 3
    releases the rest by need (in wait order among equal needs). Planted error tried: the least
    need left as the first remaining waiter's (4 is then missed at the bump to 4)."""
    got: list[str] = []
    board = SignalBoard(1, got.append)
    key = key_of(0, "s", 0)
    for need, name in ((5, "a5"), (3, "b3"), (4, "c4")):
        assert board.wait_key(key, need, name)
    for value, want in ((1, []), (2, []), (3, ["b3"]), (4, ["b3", "c4"]), (5, ["b3", "c4", "a5"])):
        board.bump_keys([key])
        assert board.count(Signal(0, "s", 0)) == value and got == want
    got.clear()
    for need, name in ((8, "d8"), (7, "e7"), (8, "f8"), (9, "g9")):
        assert board.wait_key(key, need, name)
    assert not board.wait_key(key, 5, "h5")  # (holds already)
    board.bump_keys([key], 3)  # 5 -> 8: e7, then d8 and f8 in wait order; g9 waits on
    assert got == ["e7", "d8", "f8"]
    board.bump_keys([key, key], 1, 1)
    assert got == ["e7", "d8", "f8", "g9"] and board.count(Signal(0, "s", 0)) == 10


def test_a_key_is_linear_in_rank_and_index_and_reads_back():
    """``key_of`` against its definition: every (rank, name, index) reads back through ``signal_of``;
    a member's key is member 0's plus its steps (``step_of``), negative steps and indexes included;
    distinct signals get distinct keys, negative ranks too (a random group's member may step below 0);
    member 0's index past its field is refused, not wrapped into the name's (validate() refuses any member's:
    tests/core/test_signal_table.py).
    Planted errors tried: the index field unbiased (a negative index read back wrong), the rank
    shifted by the name's width (keys of ranks 1 and 0 met)."""
    from mkernel.sim.signals import signal_of, step_of

    rng = random.Random(3)
    seen: dict[int, tuple] = {}
    for _ in range(4000):
        rank, index = rng.randrange(-2 ** 14, 2 ** 14), rng.randrange(-2 ** 31, 2 ** 31)
        name = rng.choice(["a", "contrib", "final", "z9"])
        key = key_of(rank, name, index)
        assert signal_of(key) == Signal(rank, name, index) and -2 ** 61 <= key < 2 ** 61
        assert seen.setdefault(key, (rank, name, index)) == (rank, name, index)
        dk, dx = rng.randint(-2 ** 14 - rank, 2 ** 14 - 1 - rank), rng.randint(-2 ** 31 - index, 2 ** 31 - 1 - index)
        assert key + step_of(dk, dx) == key_of(rank + dk, name, index + dx)
    for bad in ((0, "a", 2 ** 31), (3, "a", -2 ** 31 - 1)):
        with pytest.raises(ValueError, match="are simulated"):
            key_of(*bad)

