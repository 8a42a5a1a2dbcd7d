"""What the SMs of a launch hold: the launch on a rank (:class:`Lane`), the members they take together
(:class:`Run`), and which of a member's waits hold when they take it (:class:`Waits`, the reads of
the signal board); :class:`~mkernel.sim.dispatch.Dispatch` makes and moves them."""
from __future__ import annotations

from typing import Any, Final

from mkernel.ir import Op, Role, Step, Task, Wait

from .signals import SignalBoard, key_of
from .sms import Item, RolePool, RoleQueue

PUT: Final = Op.PUT  # (Final: compiled, a C static; see mkernel.sim.dispatch)
COPY: Final = Op.COPY
REDUCE: Final = Op.REDUCE
GATHER: Final = Op.GATHER
READY: Final[tuple[int, Any, int]] = (-1, None, 0)  # _blocking's answer where none of a member's waits is left
NAMELESS: Final[tuple] = ()  # the slots of a run of counted SMs (slot -1: Dispatch._bulk; only named SMs' slots are read)


class Lane:
    """One launch on one rank: its role pool, the SMs not yet retired, and the event of its end.
    ``released``: the runs released at this instant that wait for their resume slot, or None
    (:meth:`~mkernel.sim.dispatch.Dispatch._released`); ``timers``: its pending :class:`Timer` s, oldest
    first (:meth:`~mkernel.sim.dispatch.Dispatch._later`). ``due`` and ``wake``: the model's ``_due`` and
    ``_wake`` bound once, as the lane is made, for the timers and resume slots it queues: ``self._due``
    read from compiled code binds a new method object each time (~340 instructions: 108k times in the
    2 x 8 every-node run). Held by the lane, not the model, which would then point at itself."""

    __slots__ = ("rank", "pool", "alive", "done", "released", "timers", "due", "wake")

    def __init__(self, rank: int, pool: RolePool, alive: int, done, due: Any, wake: Any) -> None:
        self.rank, self.pool, self.alive, self.done, self.due, self.wake = rank, pool, alive, done, due, wake
        self.released: list[Run] | None = None
        self.timers: list[Timer] = []


class Timer:
    """A step (``then``, the model's function) due at ``at`` for ``runs``, all of one lane.
    Why per lane, not in a dict keyed by (lane, step, time): a lane has few timers pending (at most 6
    in the 2 x 8 every-node GEMM+AR run, mostly 2-3), so a scan of a short list costs less than making,
    hashing and finding that key at each of the run's 123k steps (-2% of the row's instructions). A MoE
    lane holds up to ~50, where the scan costs about what the dict did (its every-node run: +0.07%)."""

    __slots__ = ("then", "at", "runs")

    def __init__(self, then: Any, at: float, run: Run) -> None:
        self.then, self.at, self.runs = then, at, [run]


class Run:
    """Members ``first .. first + n - 1`` of one queue entry (``task``; its :class:`~mkernel.sim.sms.Item`
    ``item``), taken together by the SMs ``slots`` (named SMs' slots; :data:`NAMELESS` for counted SMs).

    ``wait`` >= 0: blocked on that wait (``key`` reaching ``need``); ``speed``: the GEMM speed
    class its members were taken at (:func:`cost.sm_speed`); ``start``: when its work began.
    ``parts``: None, or [task, first, n] of each entry a run of ready GEMM tiles of one cost spans
    (:meth:`~mkernel.sim.dispatch.Dispatch._join`), ``task`` and ``first`` being the first part's and ``n`` the total.
    ``seq``: set when it waits on the board (unset before), the order of its latest wait among all the
    runs' (:meth:`~mkernel.sim.engine.Model.blocked`); with a controller, 0 once it has been released."""

    __slots__ = ("lane", "role", "item", "task", "first", "n", "slots", "wait", "key", "need", "speed", "start",
                 "paid", "later", "parts", "seq")
    seq: int  # (mypyc: set outside __init__)

    def __init__(self, lane: Lane, role: Role, item: Item, first: int, slot: int, wait: int, key, need: int,
                 speed: float) -> None:
        self.lane, self.role, self.item, self.task, self.first, self.n = lane, role, item, item.task, first, 1
        self.slots: Any = [slot] if slot >= 0 else NAMELESS
        self.wait, self.key, self.need, self.speed, self.start = wait, key, need, speed, 0.0
        self.paid = False
        self.later: Any = ()  # a peer copy's signals need no flag latency; flags in flight
        self.parts: list[list] | None = None

    def member(self, j: int = 0) -> Task:
        if self.parts is not None:
            for task, first, n in self.parts:
                if j < n:
                    return task.member(first + j) if task.count > 1 else task
                j -= n
        return self.task.member(self.first + j) if self.task.count > 1 else self.task

    def entries(self) -> list[list] | tuple[tuple[Task, int, int]]:
        """(task, first, n) of each entry this run holds members of."""
        return self.parts if self.parts is not None else ((self.task, self.first, self.n),)

    def absorb(self, task: Task, n: int) -> None:
        """The first ``n`` members of ``task``, the entry after the last one's, join."""
        if self.parts is None:
            self.parts = [[self.task, self.first, self.n]]
        self.parts.append([task, 0, n])
        self.n += n


class Waits:
    """The wait checks of :class:`~mkernel.sim.dispatch.Dispatch` (a mixin: the model owns the board
    and ``stress``), on the entries' :class:`~mkernel.sim.sms.Item` s, which it makes."""

    __deletable__ = ('board',)  # (Model.close(): mypyc)
    board: SignalBoard
    stress: float

    def _item(self, task: Task) -> Item:
        """``task``'s :class:`~mkernel.sim.sms.Item`: its waits' (member 0's key, key step, count), member
        i's key being key + i * step (a group's waits step by index only: ``Step.waits``; every member's
        are the same where they do not step), and whether its members may share a run (:func:`joins`)."""
        op, count, waits = task.op, task.count, task.waits
        step = task.step if count > 1 else None
        dxs: tuple[int, ...] = step.waits if step is not None else ()
        steps = bool(dxs)
        parts = [_key_part(waits[j], dxs[j] if steps else 0) for j in range(len(waits))]  # (indexed: zip() is a
        # generic iterator; dxs: one a wait, Step's contract)
        return Item(task, op, count, parts, steps, joins(op, count, step, self.stress),
                    op is COPY or op is REDUCE or op is GATHER)

    def _entry_item(self, q: RoleQueue, task: Task, i: int) -> Item:
        """The record of ``task``, the entry of ``q`` whose member ``i`` an SM takes: the one ``q`` holds past
        member 0 (members are taken in order, so it is this entry's), else made now and held there."""
        item = q.item if i else None
        if item is None:
            item = q.item = self._item(task)
        return item

    def _waits_of(self, item: Item, first: int, n: int) -> list[tuple]:
        """(first member, members, (wait, key, need)) for spans of members ``first .. first+n-1`` in
        one wait state: all of them when their waits do not step, else each span of ready members
        and each blocked member alone, at its first wait not holding. (Taking a ready span at once
        is what taking its members one by one does: nothing a take changes is read by the next
        one's wait check, so the spans are listed before any is taken. A ring's copies are mostly
        ready when taken: 688k members of a 2 x 8 ring attention run, none blocked.)"""
        if not item.steps:  # (a list, as the others: compiled, its reader's loop is a native one)
            return [(first, n, self._blocking(item, first, 0))]
        cells = self.board.cells  # (key -> its Cell: signals.SignalBoard)
        waits = item.parts
        spans: list[tuple] = []
        ready = first  # the first member of the ready span being listed
        if len(waits) == 1:  # (the loop below for one wait, without its inner loop)
            key0, dx, need = waits[0]
            for i in range(first, first + n):
                key = key0 + i * dx
                if (0 if (cell := cells.get(key)) is None else cell.count) < need:
                    if i > ready:
                        spans.append((ready, i - ready, READY))
                    spans.append((i, 1, (0, key, need)))
                    ready = i + 1
            if ready < first + n:
                spans.append((ready, first + n - ready, READY))
            return spans
        for i in range(first, first + n):
            for w, (key0, dx, need) in enumerate(waits):
                key = key0 + i * dx
                if (0 if (cell := cells.get(key)) is None else cell.count) < need:
                    if i > ready:
                        spans.append((ready, i - ready, READY))
                    spans.append((i, 1, (w, key, need)))
                    ready = i + 1
                    break
        if ready < first + n:
            spans.append((ready, first + n - ready, READY))
        return spans

    def _blocking(self, item: Item, i: int, at: int) -> tuple[int, int | None, int]:
        """The first of member ``i``'s waits from ``at`` on that does not hold: (index, key, count),
        or (-1, None, 0).

        Counters only grow within a run, so a wait that held once holds for good: for waits that do
        not step (every member's are the same), the waits found to hold are remembered per entry
        (``Item.held``) and not read again (an attention tile's 96 waits were read at every take)."""
        parts = item.parts
        if at >= len(parts):
            return READY
        cells = self.board.cells  # (key -> its Cell: signals.SignalBoard)
        if item.steps:
            for j in range(at, len(parts)):
                key0, dx, need = parts[j]
                key = key0 + i * dx
                if (0 if (cell := cells.get(key)) is None else cell.count) < need:
                    return j, key, need
            return READY
        held = item.held
        start = at if at > held else held
        for j in range(start, len(parts)):
            key, _, need = parts[j]
            if (0 if (cell := cells.get(key)) is None else cell.count) < need:
                if start == held:
                    item.held = j
                return j, key, need
        if start == held:
            item.held = len(parts)
        return READY


def joins(op: Op, count: int, step: Step | None, stress: float) -> bool:
    """Whether members of a group (``op``, ``count`` members, ``step``; None for one member) may share
    a run: not under stress (each SM starts late by its own draw), not for puts (each is its own
    message), and not for a peer copy whose members reach other ranks (each its own flow)."""
    if count <= 1 or stress > 0 or op is PUT:
        return False
    if (op is COPY or op is REDUCE or op is GATHER) and step is not None:  # (the NVLink ops: a tuple's `in`
        # compares each member generically)
        regions: tuple[tuple, ...] = step.regions  # (read as tuples: compiled, a loop of C reads; their items
        for region in regions:  # untyped: any number)
            if region[0]:
                return False
    return True


def _key_part(w: Wait, dx: int) -> tuple[int, int, int]:
    """(key, key step ``dx``, count) of the wait ``w`` (its signal read once: each IR field read from the
    compiled core is a generic attribute read)."""
    g = w.signal
    return key_of(g.rank, g.name, g.index), dx, w.count
