"""The event engine's small pieces: an event-counting environment, the signal counters and a run's bumps."""
from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Generator, Iterable
from functools import lru_cache, partial
from heapq import heappop, heappush
from operator import itemgetter
from typing import Any

import simpy
from simpy.core import NORMAL, URGENT, EmptySchedule, EventPriority, StopSimulation

from mkernel.ir import Signal, Task

NEVER = 1 << 62  # a cell's least need without waiters: above any count (an int, as the counts: a quick comparison)
_need = itemgetter(0)  # a waiter's (need, waiter) -> need
STILL = ((0, 0),)  # the signal steps of a group whose one signal does not move (flat_keys)


def flat_keys(t: Task, first: int = 0, n: int | None = None) -> tuple[list[tuple], int, int]:
    """The bumps that members ``first .. first+n-1`` of ``t`` (all by default) make, in the flat
    schedule's order, as (keys, times, repeat): member by member, each its signals' keys in order,
    each key bumped ``times`` times in a row (> 1 only for a group's one fixed signal), the list
    ``repeat`` times over (> 1 only for a group's fixed signals). The order decides which waiters
    wake first. (:func:`mkernel.signal_table.bump_keys` lists a group's fixed signals first, n times
    at once: the same order where the members have one signal, or none that does not step.)"""
    n = t.count - first if n is None else n
    signals, st = t.signals, t.step
    if t.count == 1 or not st.signals or st.signals == STILL and not st.period:  # nothing steps
        # (STILL: one signal whose step is zero, every member's key the same: a node sum's ready flag,
        # bumped by each of its G members: one key bumped n times, not n equal keys, each made and found)
        if len(signals) == 1:
            g = signals[0]
            return [(g.rank, g.name, g.index)], n, 1
        return [(g.rank, g.name, g.index) for g in signals], 1, n
    if st.period:  # member i steps (i mod period) times the inner steps and (i div period) times the outer
        p = st.period
        if len(signals) == 1:  # (a GEMM tile row's one flag: its members' steps, shared by its shape)
            g = signals[0]
            moves = _cycle_moves(t.count, p, st.rotate, *st.signals[0], *st.outer[0])[0]
            rank, name, index = g.rank, g.name, g.index
            return [(rank + dr, name, index + di) for dr, di in moves[first:first + n]], 1, 1
        out: list[tuple] = []
        wrap = p - st.rotate  # (Task.offset: past the wrap, a member steps back by the period in its cycle)
        moves7 = [(g.rank, g.name, g.index, dk, dx, ok, ox)
                  for g, (dk, dx), (ok, ox) in zip(signals, st.signals, st.outer)]
        for i in range(first, first + n):
            a, b = divmod(i, p)
            if b >= wrap:
                b -= p
            out += [(rank + b * dk + a * ok, name, index + b * dx + a * ox)
                    for rank, name, index, dk, dx, ok, ox in moves7]
        return out, 1, 1
    offsets: range | list[int] = range(first, first + n)
    if st.rotate:  # (Task.offset: members from count - rotate on step back by count)
        wrap, end = t.count - st.rotate, first + n
        offsets = [*range(first, min(end, wrap)), *range(max(first, wrap) - t.count, end - t.count)]
    if len(signals) == 1:
        g, (dk, dx) = signals[0], st.signals[0]
        rank, name, index = g.rank, g.name, g.index
        return [(rank + i * dk, name, index + i * dx) for i in offsets], 1, 1
    moves5 = [(g.rank, g.name, g.index, dk, dx) for g, (dk, dx) in zip(signals, st.signals)]
    return [(rank + i * dk, name, index + i * dx) for i in offsets for rank, name, index, dk, dx in moves5], 1, 1


def run_bumps(entries: Iterable, rank: int) -> tuple[list[list], list[list]]:
    """The bumps of a run's members (``entries``: (task, first, n) of each entry it holds) as (now,
    later), lists of [keys, times, repeat] (:func:`flat_keys`) each in the members' order; ``later``:
    flags stored to a peer (keys of another rank than ``rank``). (A run that paid the latency bumps
    every key now: :meth:`~mkernel.sim.engine.Model._signal`.)"""
    now: list[list] = []
    later: list[list] = []
    for task, first, n in entries:
        st = task.step
        if task.count > 1 and st.period and st.signals and len(task.signals) == 1:
            local, far = _period_split(task, first, n, rank)  # (a GEMM tile row's one flag)
            _more(now, local, 1, 1)
            _more(later, far, 1, 1)
            continue
        keys, times, repeat = flat_keys(task, first, n)
        local = [k for k in keys if k[0] == rank]
        if len(local) == len(keys):  # (all local, or none: the one list; mixed: split in order)
            _more(now, local, times, repeat)
        elif not local:
            _more(later, keys, times, repeat)
        else:
            _more(now, local, times, repeat)
            _more(later, [k for k in keys if k[0] != rank], times, repeat)
    return now, later


def _period_split(t: Task, first: int, n: int, rank: int) -> tuple[list[tuple], list[tuple]]:
    """:func:`flat_keys`'s keys of members ``first .. first+n-1`` of ``t`` (one signal cycling with a
    period), split into those of ``rank`` and the rest, each in member order: the members on ``rank``
    found by bisection among those of rank step ``rank - rank0`` (:func:`_cycle_moves`), not key by key."""
    st, g = t.step, t.signals[0]
    moves, on = _cycle_moves(t.count, st.period, st.rotate, *st.signals[0], *st.outer[0])
    rank0, name, index = g.rank, g.name, g.index
    keys = [(rank0 + dr, name, index + di) for dr, di in moves[first:first + n]]  # (flat_keys' keys, inline)
    mine = on.get(rank - rank0, ())
    mine = mine[bisect_left(mine, first):bisect_left(mine, first + n)]
    local = [keys[i - first] for i in mine]
    for i in reversed(mine):  # (from the last: the positions before it stay put)
        del keys[i - first]
    return local, keys


@lru_cache(maxsize=256)
def _cycle_moves(count: int, p: int, rotate: int, dk: int, dx: int, ok: int, ox: int) -> tuple[tuple, dict]:
    """Each member's (rank step, index step) where one signal cycles with the period ``p`` (as Task.member_signals),
    and the members by rank step: shared by tile rows (and cached across runs), so tuples: no caller can change them."""
    moves: list[tuple[int, int]] = []
    on: dict[int, list[int]] = {}
    for i in range(count):
        a, b = divmod(i, p)
        if rotate and b >= p - rotate:  # (wrapped within its cycle)
            b -= p
        moves.append((b * dk + a * ok, b * dx + a * ox))
        on.setdefault(b * dk + a * ok, []).append(i)
    return tuple(moves), {k: tuple(v) for k, v in on.items()}


def _more(bumps: list[list], keys: list[tuple], times: int, repeat: int) -> None:
    """``keys`` (a list of the caller's own; each bumped ``times`` times, the list ``repeat`` times)
    after ``bumps``: joined to the last list where both bump each key once."""
    if not keys:
        return
    if times == 1 and repeat == 1 and bumps and bumps[-1][1] == 1 and bumps[-1][2] == 1:
        bumps[-1][0] += keys
        return
    bumps.append([keys, times, repeat])


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


class CountingEnvironment(simpy.Environment):
    """A SimPy environment that counts the events it processes, schedules plain calls (:meth:`call_later`) and runs
    processes nothing waits on (:meth:`start`): most of a run's events are timers with one callback, whose Timeout
    would cost about as much as the work it triggers. A plain call sits in the queue as the pair ``(fn, arg)`` where
    such a Timeout would (nothing waits on it, and it cannot fail; simpy types its queue as holding events, so the
    pushes are ``type: ignore``d for the compile). ``now`` is a plain attribute (SimPy's is a property)."""

    now = 0.0

    def __init__(self) -> None:
        super().__init__(0.0)  # (a float from the start: the compiled core's ``now`` is one)
        self.now = self._now
        self.events = 0
        self._streaks: dict[object, Streak] = {}  # the streaks with a pending slot, by key
        self._current: Streak | None = None  # the streak whose slot is being run

    def call_later(self, delay: float, fn: Callable, arg=None) -> None:
        """Call ``fn(arg)`` ``delay`` from now, in the order a Timeout made now would fire."""
        if delay < 0:
            raise ValueError(f"Negative delay {delay}")
        heappush(self._queue, (self._now + delay, NORMAL, next(self._eid), (fn, arg)))  # type: ignore

    def call_at(self, when: float, fn: Callable, arg=None) -> None:
        """Call ``fn(arg)`` at time ``when`` (not before now): the time itself, not now plus a delay,
        whose float sum could round off it."""
        if when < self._now:
            raise ValueError(f"{when} is in the past (now {self._now})")
        heappush(self._queue, (when, NORMAL, next(self._eid), (fn, arg)))  # type: ignore

    def call_first(self, fn: Callable, arg=None) -> None:
        """Call ``fn(arg)`` at this instant before its other events, where ``start`` would run a
        process's first step (an URGENT entry): a step that was a process's start, without the process."""
        heappush(self._queue, (self._now, URGENT, next(self._eid), (fn, arg)))  # type: ignore

    def call_in_streak(self, key: object, when: float, fn: Callable, arg) -> None:
        """Call ``fn(arg)`` at ``when`` (not before now), in the order :meth:`call_at` would, as a slot
        of the streak ``key`` (its calls all ``fn`` at ``when``)."""
        streak = self._streaks.get(key)
        eid = next(self._eid)
        if streak is not None:  # a key names one time (and the callback its step has)
            assert streak.when == when, (key, when, streak.when)
        else:
            if when < self._now:
                raise ValueError(f"{when} is in the past (now {self._now})")
            streak = self._streaks[key] = Streak(key, when, fn)
            heappush(self._queue, (when, NORMAL, eid, streak))  # type: ignore
        streak.eids.append(eid)
        streak.args.append(arg)

    def due_now(self) -> bool:
        """Whether an event is due at this instant, besides the one being processed."""
        current = self._current
        return (bool(self._queue) and self._queue[0][0] <= self._now
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
                    break
                most -= 1
                if not most or queue and queue[0] < (when, NORMAL, eids[i]):
                    heappush(queue, (when, NORMAL, eids[i], streak))  # type: ignore
                    break
                self.events += 1
        finally:  # a callback that raised leaves due_now() true to the queue
            self._current = None

    def start(self, gen: Generator) -> None:
        """Run the generator ``gen`` as ``process(gen)`` would (from this instant, before its other
        events), less the Process event that nothing here waits on: ``yield`` a number to wait that
        many us (timed as a Timeout made there would be), or an event to wait until it is processed
        (its value is sent back, a failure thrown in)."""
        heappush(self._queue, (self._now, URGENT, next(self._eid), (self._resume, (gen, None))))  # type: ignore

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

    def _resumed(self, gen: Generator, event) -> None:
        self._resume((gen, event))

    def run(self, until: float | simpy.Event | None = None) -> object:
        """SimPy's ``run``; with no ``until`` (every run of a model), :meth:`step`'s work in one loop,
        a call a step less (one per event)."""
        if until is not None:
            return super().run(until)
        queue = self._queue
        while queue:
            self.events += 1
            when, _, _, event = heappop(queue)
            self.now = self._now = when
            if event.__class__ is tuple:
                event[0](event[1])
            elif event.__class__ is Streak:
                self._slots(event, -1)
            else:
                self._process(event)
        self.events += 1  # (as the step that finds the queue empty counts itself)
        return None

    def step(self) -> None:
        self.events += 1
        try:
            self.now, _, _, event = heappop(self._queue)
        except IndexError:
            raise EmptySchedule from None
        self._now = self.now
        if event.__class__ is tuple:
            event[0](event[1])
            return
        if event.__class__ is Streak:
            self._slots(event, 1)
            return
        self._process(event)

    def _process(self, event) -> None:
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


class SignalBoard:
    """The signal counters of one call (one epoch). On the GPU every value is stamped with the epoch
    of the call that wrote it, so what earlier calls left reads as 0 and nothing is zeroed between
    calls; a board lives for one call, so every value it holds is of that call, and it keeps plain
    counts (``epoch`` names the call in errors). A bump hands every waiter whose count it reaches to
    ``release``; ``wait_key`` returns False when the count already holds, so the common case costs
    nothing. Counters are keyed by (rank, name, index) tuples, so the members of a group reach theirs
    without building a Signal each. Each key has one cell, ``[count, waiters or None, least need]``
    (``cells``; a key never bumped nor waited on has none, and counts 0): a bump finds them with one
    lookup (a tuple key is hashed at every lookup), and one comparison with its waiters' least need
    (:data:`NEVER` without) tells whether it releases any (most do not: a GEMM tile row's flag waits
    for all 8 ranks' bumps)."""

    def __init__(self, env: simpy.Environment, epoch: int, release: Callable[[Any], None],
                 home: list[int] | None = None) -> None:
        self.env, self.epoch, self.release = env, epoch, release
        self.home = home  # a folded run's ranks (sim/localfold.py): each key's rank is its base's
        self.cells: dict[tuple, list] = {}  # key -> [count, list of (need, waiter) in wait order or None, least need]

    def count(self, sig: Signal) -> int:
        cell = self.cells.get((sig.rank, sig.name, sig.index))
        return 0 if cell is None else cell[0]

    def bump_keys(self, keys: list[tuple], times: int = 1, repeat: int = 1) -> None:
        """Each key of ``keys`` bumped ``times`` times, in order, the list ``repeat`` times over (one
        call for a run's bumps: the hottest code of a run). A bump of ``times`` > 1 is ``times``
        bumps of one: its waiters are released as those would release them, by the count they wait
        for (in wait order among equal counts). What a bump does that anything sees is the values it
        leaves and the waiters it releases, in order; releases come only from keys with waiters, so a
        list repeated whose keys have none (a copy's 7 fixed flags) is bumped ``repeat * times`` at once."""
        cells, release = self.cells, self.release
        get = cells.get
        if self.home is not None:  # (two bumps of one counter in a row are one of two: the same releases)
            home = self.home
            keys = [(home[k[0]], k[1], k[2]) for k in keys]
        if repeat > 1:  # each key's cell found once (a missing one made at 0: what no cell counts)
            found = [get(key) or cells.setdefault(key, [0, None, NEVER]) for key in keys]
            for fcell in found:
                if fcell[1] is not None:
                    found = found * repeat
                    break
            else:
                times *= repeat
            for fcell in found:
                value = fcell[0] = fcell[0] + times
                if value >= fcell[2]:
                    self._wake(fcell, value, times)
            return
        for key in keys:
            cell = get(key)
            if cell is None:  # (no waiter before its first bump or wait)
                cells[key] = [times, None, NEVER]
                continue
            value = cell[0] = cell[0] + times
            if value < cell[2]:  # (most bumps: no waiter, or none whose count it reaches)
                continue
            waiting = cell[1]
            if len(waiting) == 1:  # the common release, inline (a call a release costs: 164k in the row)
                cell[1], cell[2] = None, NEVER
                release(waiting[0][1])
            else:
                self._wake(cell, value, times)

    def _wake(self, cell: list, value: int, times: int) -> None:
        """The waiters of ``cell`` whose count its bump of ``times`` to ``value`` reaches, released."""
        still: list = []
        due: list = []
        for need, waiter in cell[1]:
            (due if need <= value else still).append((need, waiter))
        cell[1], cell[2] = (still, min(map(_need, still))) if still else (None, NEVER)
        if times > 1 and len(due) > 1:
            due.sort(key=_need)  # (stable)
        for _, waiter in due:
            self.release(waiter)

    def wait_key(self, key: tuple, need: int, waiter: object) -> bool:
        """Whether ``key`` has yet to reach ``need``; if so, ``release(waiter)`` is called when it
        does (from the bump, so it should only schedule work)."""
        cell = self.cells.get(key)
        if cell is None:
            if need <= 0:
                return False
            self.cells[key] = [0, [(need, waiter)], need]
            return True
        if cell[0] >= need:
            return False
        if cell[1] is None:
            cell[1], cell[2] = [(need, waiter)], need
        else:
            cell[1].append((need, waiter))
            if need < cell[2]:
                cell[2] = need
        return True
