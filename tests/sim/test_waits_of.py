"""Dispatch._waits_of: the spans it lists for a group whose waits step are those its members give
one by one (:meth:`Dispatch._blocking` of each from its first wait): each run of ready members one
span, each blocked member alone, at its first wait not holding, with that wait's key and count."""
from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from mkernel.ir import Op, Role, Signal, Step, Task, Wait
from mkernel.sim.dispatch import READY, Dispatch


class _Board(Dispatch):
    """A dispatcher with a board of given counters and nothing else."""

    def __init__(self, values: dict) -> None:
        self.board = SimpleNamespace(cells={key: [count, None] for key, count in values.items()})
        self._stepping: dict = {}
        self._held: dict = {}


def _one_by_one(d: _Board, task: Task, first: int, n: int) -> list:
    spans = []
    for i in range(first, first + n):
        state = d._blocking(task, i, 0)
        if state == READY and spans and spans[-1][2] == READY and spans[-1][0] + spans[-1][1] == i:
            spans[-1] = (spans[-1][0], spans[-1][1] + 1, READY)
        else:
            spans.append((i, 1, state))
    return spans


@pytest.mark.python_core
@pytest.mark.parametrize("seed", range(40))
def test_spans_are_the_members_taken_one_by_one(seed):
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
    got = d._waits_of(task, first, n)
    assert got == _one_by_one(_Board(values), task, first, n)
    assert sum(span[1] for span in got) == n
