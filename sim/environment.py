"""The simulator's event loop: a SimPy environment of its own, that the compiled core reads as a native class.

Why not a subclass of ``simpy.Environment``: mypyc compiles a subclass of a Python class as a
Python class, so every read of its time, queue or event counter and every call of its methods
from the compiled core went through CPython's generic attribute and method lookup, about 180
instructions a read; a 2 x 8 GEMM+AR's run makes about a million of them. This class is what
SimPy's events and processes use of an environment (``schedule``, ``now``, ``active_process`` and
the ``event``/``timeout``/``process``/``all_of``/``any_of`` factories; SimPy's own ``Environment.run``
works on it too, through its ``step``) with the same event ids and order; compiled, its fields
are struct members. It also schedules plain calls (:meth:`call_later`: a timer with one callback,
whose Timeout would cost about as much as the work it triggers), streaks of them
(:meth:`call_in_streak`) and processes nothing waits on (:meth:`start`). A plain call sits in the
queue as its entry's ``item`` (fn) and ``arg`` where a Timeout would (nothing waits on it, and it cannot fail).

The queue is a binary heap of :class:`Entry` (time, then priority and event id as one number), not
heapq's of tuples: each of heapq's comparisons of two tuples was about 340 instructions through
CPython's generic comparison (1.5M of them in a 2 x 8 GEMM+AR every-node run), where compiled
comparisons of an entry's float and int fields are a few. Every entry's key is distinct (the event
id), so any heap pops the same entries in the same order. :meth:`CountingEnvironment.run` keeps the
entries it has run for the calls it queues next (``_free``): making and freeing one, a tracked object,
cost about as much as the heap's work for it.
"""
from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from functools import partial
from typing import Any, Final

import simpy
from simpy.core import NORMAL, URGENT, EmptySchedule, EventPriority, StopSimulation

# an entry's order: priority * ORDER + event id (ids stay below it: 2.8e14 events); Final: compiled, C constants
ORDER: Final = 1 << 48
NORMAL_ORDER: Final = int(NORMAL) * ORDER
URGENT_ORDER: Final = int(URGENT) * ORDER
EVENT: Final = object()  # the ``arg`` of an entry whose item is a SimPy event (or a streak), not a plain call


class Entry:
    """One queued event: ``item`` (an event or a :class:`Streak`, ``arg`` then :data:`EVENT`; or a plain call's
    fn, called with ``arg``) due at ``when``; entries at one time go by ``order`` (priority, then the order they
    were queued in)."""

    __slots__ = ("when", "order", "item", "arg")

    def __init__(self, when: float, order: int, item: Any, arg: Any = EVENT) -> None:
        self.when, self.order, self.item, self.arg = when, order, item, arg


def push(heap: list[Entry], entry: Entry) -> None:
    """``entry`` into the binary heap ``heap`` (heapq's sift, on the entries' two fields)."""
    i = len(heap)
    heap.append(entry)
    when, order = entry.when, entry.order
    while i:
        p = (i - 1) >> 1
        up = heap[p]
        if up.when < when or up.when == when and up.order < order:
            break
        heap[i] = up
        i = p
    heap[i] = entry


def pop(heap: list[Entry]) -> Entry:
    """The first entry of the non-empty heap ``heap``, taken out."""
    top = heap[0]
    last = heap.pop()
    n = len(heap)
    if n:
        when, order = last.when, last.order
        i = 0
        c = 1
        while c < n:
            child = heap[c]
            if c + 1 < n:
                right = heap[c + 1]
                if right.when < child.when or right.when == child.when and right.order < child.order:
                    c += 1
                    child = right
            if when < child.when or when == child.when and order < child.order:
                break
            heap[i] = child
            i = c
            c = 2 * i + 1
        heap[i] = last
    return top


class Streak:
    """Timers of one step at one instant, each a slot ``(eid, arg)``: the calls ``fn(arg)`` in eid order. The queue
    holds the streak once, under its first pending slot's eid; the loop runs its slots one after the other while each
    is the queue's next event, so the order (and the count: one event a slot) is that of one queue entry a slot."""

    __slots__ = ("key", "when", "fn", "eids", "args", "at")

    def __init__(self, key: object, when: float, fn: Callable) -> None:
        self.key, self.when, self.fn = key, when, fn
        self.eids: list[int] = []
        self.args: list = []
        self.at = 0  # the first pending slot


def _processed(event: Any) -> bool:
    """Whether SimPy has processed ``event`` (its callbacks are None then, though SimPy types them as a
    list: read untyped, as the compiled core would refuse None where it expects a list)."""
    return event.callbacks is None


class CountingEnvironment:
    """A SimPy environment (see the module) that counts the events it processes (``events``: one a
    queue entry taken or streak slot run, and one for the step that finds the queue empty, as
    SimPy's loop counts its steps). ``now`` is a plain field, a float from the start."""

    def __init__(self) -> None:
        self.now = 0.0
        self.events = 0
        self._queue: list[Entry] = []  # a heap (push, pop)
        self._eid = 0  # the next event's id: ties of time and priority go in the order scheduled
        self._active_proc: object = None  # (set by SimPy's Process while it runs)
        self._streaks: dict[object, Streak] = {}  # the streaks with a pending slot, by key
        self._last: Streak | None = None  # the streak call_in_streak found or made last, while it has a pending slot
        self._current: Streak | None = None  # the streak whose slot is being run
        self._free: list[Entry] = []  # entries run (by run()), for the calls queued next (_entry)

    # -- what SimPy's events and processes use ---------------------------------------------------
    @property
    def active_process(self) -> Any:
        return self._active_proc

    def schedule(self, event: Any, priority: EventPriority = NORMAL, delay: float = 0) -> None:
        """Queue ``event`` ``delay`` from now (SimPy's ``Environment.schedule``)."""
        eid = self._eid
        self._eid = eid + 1
        push(self._queue, Entry(self.now + delay, int(priority) * ORDER + eid, event))

    def peek(self) -> float:
        """The time of the next queued event (infinity without one)."""
        return self._queue[0].when if self._queue else simpy.core.Infinity

    def event(self) -> simpy.Event:
        return simpy.Event(self)  # type: ignore[arg-type]  # (SimPy's events need only the above)

    def timeout(self, delay: float, value: Any = None) -> simpy.Timeout:
        return simpy.Timeout(self, delay, value)  # type: ignore[arg-type]

    def process(self, generator: Generator) -> simpy.Process:
        return simpy.Process(self, generator)  # type: ignore[arg-type]

    def all_of(self, events: Iterable[simpy.Event]) -> simpy.AllOf:
        return simpy.AllOf(self, events)  # type: ignore[arg-type]

    def any_of(self, events: Iterable[simpy.Event]) -> simpy.AnyOf:
        return simpy.AnyOf(self, events)  # type: ignore[arg-type]

    # -- plain calls ---------------------------------------------------------------------------
    def call_later(self, delay: float, fn: Callable, arg: Any = None) -> None:
        """Call ``fn(arg)`` ``delay`` from now, in the order a Timeout made now would fire."""
        if delay < 0:
            raise ValueError(f"Negative delay {delay}")
        eid = self._eid
        self._eid = eid + 1
        free = self._free  # (_entry, written out: the most queued call)
        if free:
            entry = free.pop()
            entry.when, entry.order, entry.item, entry.arg = self.now + delay, NORMAL_ORDER + eid, fn, arg
        else:
            entry = Entry(self.now + delay, NORMAL_ORDER + eid, fn, arg)
        push(self._queue, entry)

    def call_at(self, when: float, fn: Callable, arg: Any = None) -> None:
        """Call ``fn(arg)`` at time ``when`` (not before now): the time itself, not now plus a delay,
        whose float sum could round off it."""
        if when < self.now:
            raise ValueError(f"{when} is in the past (now {self.now})")
        eid = self._eid
        self._eid = eid + 1
        push(self._queue, self._entry(when, NORMAL_ORDER + eid, fn, arg))

    def call_first(self, fn: Callable, arg: Any = None) -> None:
        """Call ``fn(arg)`` at this instant before its other events, where ``start`` would run a
        process's first step (an URGENT entry): a step that was a process's start, without the process."""
        eid = self._eid
        self._eid = eid + 1
        push(self._queue, self._entry(self.now, URGENT_ORDER + eid, fn, arg))

    def _entry(self, when: float, order: int, item: Any, arg: Any) -> Entry:
        """An entry of these fields: one that has run, or a new one."""
        free = self._free
        if not free:
            return Entry(when, order, item, arg)
        entry = free.pop()
        entry.when, entry.order, entry.item, entry.arg = when, order, item, arg
        return entry

    def call_in_streak(self, key: object, when: float, fn: Callable, arg: Any) -> None:
        """Call ``fn(arg)`` at ``when`` (not before now), in the order :meth:`call_at` would, as a slot
        of the streak ``key`` (its calls all ``fn`` at ``when``). The streak found or made last is tried
        first: it is the one asked for in 78% of the 108k calls of the 2 x 8 every-node run (the lanes in
        lockstep, one after the other), where a lookup hashed the key (~600 instructions)."""
        streak = self._last
        if streak is None or streak.when != when or streak.key != key:
            streak = self._streaks.get(key)
            if streak is not None:  # a key names one time (and the callback its step has)
                assert streak.when == when, (key, when, streak.when)
            else:
                if when < self.now:
                    raise ValueError(f"{when} is in the past (now {self.now})")
                streak = self._streaks[key] = Streak(key, when, fn)
                push(self._queue, self._entry(when, NORMAL_ORDER + self._eid, streak, EVENT))
            self._last = streak
        eid = self._eid
        self._eid = eid + 1
        streak.eids.append(eid)
        streak.args.append(arg)

    def due_now(self) -> bool:
        """Whether an event is due at this instant, besides the one being processed."""
        current = self._current
        return (bool(self._queue) and self._queue[0].when <= self.now
                or current is not None and current.at < len(current.eids))

    def _slots(self, streak: Streak, most: int) -> None:
        """Up to ``most`` of ``streak``'s slots, from its first pending one, while each is the next
        event (an event its calls queue may come first: a process started now); then the streak is
        queued again under its next slot, or dropped when it has none left."""
        queue, when, fn, eids, args = self._queue, streak.when, streak.fn, streak.eids, streak.args
        i = streak.at
        self._current = streak
        try:
            while True:
                streak.at = i + 1
                fn(args[i])
                i += 1
                if i == len(eids):
                    del self._streaks[streak.key]
                    if self._last is streak:
                        self._last = None
                    break
                most -= 1
                if not most or queue and (queue[0].when < when or queue[0].when == when
                                          and queue[0].order < NORMAL_ORDER + eids[i]):
                    push(queue, self._entry(when, NORMAL_ORDER + eids[i], streak, EVENT))
                    break
                self.events += 1
        finally:  # a callback that raised leaves due_now() true to the queue
            self._current = None

    # -- processes nothing waits on --------------------------------------------------------------
    def start(self, gen: Generator) -> None:
        """Run the generator ``gen`` as ``process(gen)`` would (from this instant, before its other
        events), less the Process event that nothing here waits on: ``yield`` a number to wait that
        many us (timed as a Timeout made there would be), or an event to wait until it is processed
        (its value is sent back, a failure thrown in)."""
        self.call_first(self._resume, (gen, None))

    def _resume(self, state: tuple) -> None:
        gen, event = state
        while True:
            try:
                if event is None:
                    target = gen.send(None)
                elif event._ok:
                    target = gen.send(event._value)
                else:
                    event._defused = True
                    target = gen.throw(event._value)
            except StopIteration:
                return
            if isinstance(target, (float, int)):
                self.call_later(target, self._resume, (gen, None))
                return
            if target.callbacks is not None:
                target.callbacks.append(partial(self._resumed, gen))
                return
            event = target  # processed already: go on at once, as a Process does

    def _resumed(self, gen: Generator, event: Any) -> None:
        self._resume((gen, event))

    # -- the loop ----------------------------------------------------------------------------------
    def run(self, until: float | simpy.Event | None = None) -> object:
        """SimPy's ``run``; with no ``until`` (every run of a model), :meth:`step`'s work in one loop,
        a call a step less (one per event)."""
        if until is not None:
            return self._run_until(until)
        queue, free = self._queue, self._free
        while queue:
            self.events += 1
            entry = pop(queue)
            self.now = entry.when
            item, arg = entry.item, entry.arg
            entry.item = entry.arg = None  # (kept for the next call queued: it holds nothing)
            free.append(entry)
            if arg is not EVENT:
                item(arg)
            elif type(item) is Streak:
                self._slots(item, -1)
            else:
                self._process(item)
        self.events += 1  # (as the step that finds the queue empty counts itself)
        return None

    def _run_until(self, until: float | simpy.Event) -> object:
        """SimPy's ``run(until)``: step until the event ``until`` is processed (its value), or until
        the time ``until`` (scheduled as an URGENT event then, as SimPy does)."""
        if not isinstance(until, simpy.Event):
            at = until if isinstance(until, int) else float(until)
            if at <= self.now:
                raise ValueError(f"until ({at}) must be greater than the current simulation time")
            until = simpy.Event(self)  # type: ignore[arg-type]
            until._ok, until._value = True, None
            self.schedule(until, URGENT, at - self.now)
        elif _processed(until):
            return until.value
        until.callbacks.append(StopSimulation.callback)
        try:
            while True:
                self.step()
        except StopSimulation as exc:
            return exc.args[0]
        except EmptySchedule:
            raise RuntimeError(f'No scheduled events left but "until" event was not triggered: {until}') from None

    def step(self) -> None:
        self.events += 1
        if not self._queue:
            raise EmptySchedule
        entry = pop(self._queue)
        self.now = entry.when
        event = entry.item
        if entry.arg is not EVENT:
            event(entry.arg)
            return
        if type(event) is Streak:
            self._slots(event, 1)
            return
        self._process(event)

    def _process(self, event: Any) -> None:
        """An event's callbacks, as SimPy's ``step`` calls them."""
        callbacks, event.callbacks = event.callbacks, None
        try:
            for callback in callbacks:
                callback(event)
        except StopSimulation:  # as simpy's step: the rest of the callbacks run when resumed
            event.callbacks = callbacks[callbacks.index(callback) + 1:]
            self.schedule(event, EventPriority(-1))
            raise
        if not event._ok and not hasattr(event, "_defused"):
            exc = type(event._value)(*event._value.args)  # as simpy's step: the failure, re-raised
            exc.__cause__ = event._value
            raise exc
