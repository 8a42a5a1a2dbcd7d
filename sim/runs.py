"""What the SMs of a launch hold: the launch on a rank (:class:`Lane`) and the members they take together
(:class:`Run`); :class:`~mkernel.sim.dispatch.Dispatch` makes and moves them."""
from __future__ import annotations

from mkernel.ir import Role, Task

from .sms import RolePool


class Lane:
    """One launch on one rank: its role pool, the SMs not yet retired, and the event of its end.
    ``released``: the runs released at this instant that wait for their resume slot, or None
    (:meth:`~mkernel.sim.dispatch.Dispatch._released`)."""

    __slots__ = ("rank", "pool", "alive", "done", "released")

    def __init__(self, rank: int, pool: RolePool, alive: int, done) -> None:
        self.rank, self.pool, self.alive, self.done = rank, pool, alive, done
        self.released: list[Run] | None = None


class Run:
    """Members ``first .. first + n - 1`` of one queue entry, taken together by the SMs ``slots``.

    ``wait`` >= 0: blocked on that wait (``key`` reaching ``need``); ``speed``: the GEMM speed
    class its members were taken at (:func:`cost.sm_speed`); ``start``: when its work began.
    ``parts``: None, or [task, first, n] of each entry a run of ready GEMM tiles of one cost spans
    (:meth:`~mkernel.sim.dispatch.Dispatch._join`), ``task`` and ``first`` being the first part's and ``n`` the total."""

    __slots__ = ("lane", "role", "task", "first", "n", "slots", "wait", "key", "need", "speed", "start", "paid",
                 "later", "parts")

    def __init__(self, lane: Lane, role: Role, task: Task, first: int, slot: int, wait: int, key, need: int,
                 speed: float) -> None:
        self.lane, self.role, self.task, self.first, self.n, self.slots = lane, role, task, first, 1, [slot]
        self.wait, self.key, self.need, self.speed, self.start = wait, key, need, speed, 0.0
        self.paid, self.later = False, ()  # a peer copy's signals need no flag latency; flags in flight
        self.parts: list[list] | None = None

    def member(self, j: int = 0) -> Task:
        if self.parts is not None:
            for task, first, n in self.parts:
                if j < n:
                    return task.member(first + j) if task.count > 1 else task
                j -= n
        return self.task.member(self.first + j) if self.task.count > 1 else self.task

    def entries(self):
        """(task, first, n) of each entry this run holds members of."""
        return self.parts if self.parts is not None else ((self.task, self.first, self.n),)

    def absorb(self, task: Task, n: int) -> None:
        """The first ``n`` members of ``task``, the entry after the last one's, join."""
        if self.parts is None:
            self.parts = [[self.task, self.first, self.n]]
        self.parts.append([task, 0, n])
        self.n += n
