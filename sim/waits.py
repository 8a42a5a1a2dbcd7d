"""Which of a member's waits hold: the SMs' reads of the signal board when they take members
(:class:`~mkernel.sim.dispatch.Dispatch` builds on them)."""
from __future__ import annotations

from mkernel.ir import Task

READY = (-1, None, 0)  # what _blocking says of members none of whose waits is left to hold


class Waits:
    """The wait checks of :class:`~mkernel.sim.dispatch.Dispatch` (a mixin: the model owns the board,
    ``_stepping`` and ``_held``)."""

    def _waits_of(self, task: Task, first: int, n: int):
        """(first member, members, (wait, key, need)) for spans of members ``first .. first+n-1`` in
        one wait state: all of them when their waits do not step, else each span of ready members
        and each blocked member alone, at its first wait not holding. (Taking a ready span at once
        is what taking its members one by one does: nothing a take changes is read by the next
        one's wait check, so the spans are listed before any is taken. A ring's copies are mostly
        ready when taken: 688k members of a 2 x 8 ring attention run, none blocked.)"""
        if task.count == 1 or not task.step.waits:
            return ((first, n, self._blocking(task, first, 0)),)
        cells = self.board.cells  # (key -> [count, waiters]: signals.SignalBoard)
        waits = self._stepping.get(id(task))
        if waits is None:  # (rank, name, member 0's index, index step, count) of each wait
            waits = self._stepping[id(task)] = [(w.signal.rank, w.signal.name, w.signal.index, dx, w.count)
                                                for w, dx in zip(task.waits, task.step.waits)]
        spans = []
        ready = first  # the first member of the ready span being listed
        if len(waits) == 1:  # (the loop below for one wait, without its inner loop)
            rank, name, index, dx, need = waits[0]
            for i in range(first, first + n):
                key = (rank, name, index + i * dx)
                if (0 if (cell := cells.get(key)) is None else cell[0]) < need:
                    if i > ready:
                        spans.append((ready, i - ready, READY))
                    spans.append((i, 1, (0, key, need)))
                    ready = i + 1
            if ready < first + n:
                spans.append((ready, first + n - ready, READY))
            return spans
        for i in range(first, first + n):
            for w, (rank, name, index, dx, need) in enumerate(waits):
                key = (rank, name, index + i * dx)
                if (0 if (cell := cells.get(key)) is None else cell[0]) < need:
                    if i > ready:
                        spans.append((ready, i - ready, READY))
                    spans.append((i, 1, (w, key, need)))
                    ready = i + 1
                    break
        if ready < first + n:
            spans.append((ready, first + n - ready, READY))
        return spans

    def _blocking(self, task: Task, i: int, at: int) -> tuple[int, tuple | None, int]:
        """The first of member ``i``'s waits from ``at`` on that does not hold: (index, key, count),
        or (-1, None, 0).

        Counters only grow within a run, so a wait that held once holds for good: for waits that do
        not step (every member's are the same), the waits found to hold are remembered per entry
        (``_held``) and not read again (an attention tile's 96 waits were read at every take)."""
        waits = task.waits
        if at >= len(waits):
            return READY
        cells = self.board.cells  # (key -> [count, waiters]: signals.SignalBoard)
        if task.count > 1 and task.step.waits:
            steps = task.step.waits
            for j in range(at, len(waits)):
                w = waits[j]
                g = w.signal
                key = (g.rank, g.name, g.index + i * steps[j])
                if (0 if (cell := cells.get(key)) is None else cell[0]) < w.count:
                    return j, key, w.count
            return READY
        held = self._held.get(id(task), 0)
        start = at if at > held else held
        for j in range(start, len(waits)):
            w = waits[j]
            g = w.signal
            key = (g.rank, g.name, g.index)
            if (0 if (cell := cells.get(key)) is None else cell[0]) < w.count:
                if start == held:
                    self._held[id(task)] = j
                return j, key, w.count
        if start == held:
            self._held[id(task)] = len(waits)
        return READY
