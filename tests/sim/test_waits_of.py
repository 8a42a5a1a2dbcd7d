"""Dispatch._waits_of: the spans it lists for a group whose waits step are those its members give
one by one (each member's waits read off the board in order, its first one not holding named with its
key and count): each run of ready members one span, each blocked member alone. And
:meth:`Dispatch._blocking`, which reads a stepping group's keys from the entry's key parts
(``Item.parts``), names the same first wait as the members' own signals read one by one."""
from __future__ import annotations

import random
import pytest

from mkernel.ir import Op, Role, Signal, Step, Task, Wait
from mkernel.sim.dispatch import READY, Dispatch
from mkernel.sim.signals import NEVER, Cell, SignalBoard, key_of


class _Board(Dispatch):
    """A dispatcher with a board of given counters (the simulator's own board) and nothing else."""

    def __init__(self, values: dict) -> None:
        self.board = SignalBoard(1, lambda waiter: None)
        for key, count in values.items():
            self.board.cells.add(key_of(*key), Cell(count, None, NEVER))
        self.stress = 0.0


def _first_short(task: Task, values: dict, i: int, at: int = 0) -> tuple:
    """Member ``i``'s first wait from ``at`` on whose count is short (its index, key and count), or
    READY: its waits stepped by hand (``Step.waits``: index steps) and read from ``values`` by (rank,
    name, index)."""
    for j, (w, dx) in enumerate(zip(task.waits, task.step.waits)):
        if j < at:
            continue
        g = w.signal
        if values.get((g.rank, g.name, g.index + i * dx), 0) < w.count:
            return j, key_of(g.rank, g.name, g.index + i * dx), w.count
    return READY


def _one_by_one(task: Task, values: dict, first: int, n: int) -> list:
    spans: list = []
    for i in range(first, first + n):
        state = _first_short(task, values, i)
        if state == READY and spans and spans[-1][2] == READY and spans[-1][0] + spans[-1][1] == i:
            spans[-1] = (spans[-1][0], spans[-1][1] + 1, READY)
        else:
            spans.append((i, 1, state))
    return spans


@pytest.mark.python_core
def test_spans_and_first_waits_are_the_members_read_one_by_one():
    """40 seeded groups (1-3 waits stepping by 0-2, random counts, some keys never bumped): the spans
    equal the members' own first short waits, and so does ``_blocking`` of each member from each of
    its waits. Both ready and blocked members occur. Planted error tried: ``_blocking`` reading the
    key parts' step of wait 0 for every wait (fails here; the test before this one's fake board matched
    no key, so every member blocked)."""
    ready = blocked = 0
    for seed in range(40):
        rng = random.Random(seed)
        count = rng.randint(2, 12)
        waits = tuple(Wait(Signal(rng.randint(0, 3), f"s{j}", rng.randint(0, 4)), rng.randint(1, 3))
                      for j in range(rng.randint(1, 3)))
        step = Step(waits=tuple(rng.randint(0, 2) for _ in waits))
        if not any(step.waits):
            step = Step(waits=(1,) + step.waits[1:])
        task = Task(0, 0, Role.INTRA, Op.NOP, waits=waits, count=count, step=step)
        keys = {(w.signal.rank, w.signal.name, w.signal.index + i * dx) for w, dx in zip(waits, step.waits)
                for i in range(count)}
        values = {k: rng.randint(0, 3) for k in keys if rng.random() < 0.8}
        first = rng.randint(0, count - 1)
        n = rng.randint(1, count - first)
        d = _Board(values)
        got = d._waits_of(d._item(task), first, n)
        assert got == _one_by_one(task, values, first, n), seed
        assert sum(span[1] for span in got) == n
        d = _Board(values)
        item = d._item(task)
        for i in range(count):
            for at in range(len(waits)):
                assert d._blocking(item, i, at) == _first_short(task, values, i, at), (seed, i, at)
            ready += _first_short(task, values, i) == READY
            blocked += _first_short(task, values, i) != READY
    assert ready > 20 and blocked > 20
