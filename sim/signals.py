"""The event engine's small pieces: the signal counters and a run's bumps.

A signal (rank, name, index) is keyed by one int, ``rank << RANK_SHIFT | name id << NAME_SHIFT | index + INDEX_BIAS``
(:func:`key_of`; :func:`signal_of` reads one back). The key is linear in rank and index, so a group's
member keys are member 0's plus whole-number steps (``dk << RANK_SHIFT`` + ``dx``) and a run's keys are
sums, not tuples: no tuple is made, hashed or compared for each of the 1.2M bumps of the 2 x 8
every-node GEMM+AR run, and a key's rank is one shift."""
from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable
from functools import lru_cache
from operator import itemgetter
from typing import Any, Final, cast

from mkernel.ir import Signal, Task

NEVER: Final = 1 << 62  # a cell's least need without waiters: above any count (an int, as the counts: a quick comparison)
_need: Final = itemgetter(0)  # a waiter's (need, waiter) -> need
STILL: Final = ((0, 0),)  # the signal steps of a group whose one signal does not move (flat_keys)
NAME_SHIFT: Final = 32  # a key's fields: the biased index below bit 32, the name's id in bits 32-45, the rank above
RANK_SHIFT: Final = 46  # (ranks below 2^14 keep a key below 2^61, an int mypyc holds unboxed; any rank reads back)
INDEX_BIAS: Final = 1 << 31  # indexes from -2^31 to 2^31 - 1 held as index + INDEX_BIAS, so the field is never negative
LOW: Final = (1 << RANK_SHIFT) - 1  # a key's name and index fields
INDEX_FIELD: Final = (1 << NAME_SHIFT) - 1  # a key's (biased) index field
SPAN_SLACK: Final = 1024  # CellTable: the slots a block's list may span besides SPAN_PER_CELL per cell
SPAN_PER_CELL: Final = 16
_NAME_IDS: Final[dict[str, int]] = {}  # each signal name met in this process, numbered as met (a builder's few)
_NAMES: Final[list[str]] = []  # and back


def key_of(rank: int, name: str, index: int) -> int:
    """The board's key of signal ``name[index]`` on ``rank`` (a ValueError where a field does not fit)."""
    if not -INDEX_BIAS <= index < INDEX_BIAS:  # (validate() refuses such a schedule: every member's index)
        raise ValueError(f"signal {name}[{index}]@{rank}: indexes from -2^31 to 2^31 - 1 are simulated")
    code = _NAME_IDS.get(name)
    if code is None:
        if len(_NAMES) >= 1 << (RANK_SHIFT - NAME_SHIFT):
            raise ValueError(f"signal {name!r}: more than {len(_NAMES)} signal names in one process")
        _NAMES.append(name)  # (then the id: a name is numbered once its id reads back)
        code = _NAME_IDS[name] = len(_NAMES) - 1
    return (rank << RANK_SHIFT) + (code << NAME_SHIFT) + index + INDEX_BIAS


def signal_of(key: int) -> Signal:
    """The signal of a board key (:func:`key_of` read back)."""
    return Signal(key >> RANK_SHIFT, _NAMES[(key & LOW) >> NAME_SHIFT], (key & ((1 << NAME_SHIFT) - 1)) - INDEX_BIAS)


def step_of(dk: int, dx: int) -> int:
    """A key's step for a rank step ``dk`` and an index step ``dx``."""
    return (dk << RANK_SHIFT) + dx


def flat_keys(t: Task, first: int = 0, n: int | None = None) -> tuple[list[int], int, int]:
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
            return [key_of(g.rank, g.name, g.index)], n, 1
        return [key_of(g.rank, g.name, g.index) for g in signals], 1, n
    if st.period:  # member i steps (i mod period) times the inner steps and (i div period) times the outer
        p = st.period
        if len(signals) == 1:  # (a GEMM tile row's one flag: its members' steps, shared by its shape)
            g = signals[0]
            moves = _cycle_moves(t.count, p, st.rotate, *st.signals[0], *st.outer[0])[0]
            key = key_of(g.rank, g.name, g.index)
            return [key + move for move in moves[first:first + n]], 1, 1
        cycles = [(key_of(g.rank, g.name, g.index), _cycle_moves(t.count, p, st.rotate, dk, dx, ok, ox)[0])
                  for g, (dk, dx), (ok, ox) in zip(signals, st.signals, st.outer)]
        return [key + moves[i] for i in range(first, first + n) for key, moves in cycles], 1, 1
    spans = [(first, first + n)]
    if st.rotate:  # (Task.offset: members from count - rotate on step back by count)
        wrap, end = t.count - st.rotate, first + n
        spans = [(first, min(end, wrap)), (max(first, wrap) - t.count, end - t.count)]
    out: list[int] = []
    if len(signals) == 1:  # (keys stepped by sums: a product of a rank's step, past 2^30, is a generic int's)
        g, (dk, dx) = signals[0], st.signals[0]
        key, step = key_of(g.rank, g.name, g.index), step_of(dk, dx)
        for lo, hi in spans:
            k = key + step_of(lo * dk, lo * dx)
            for _ in range(lo, hi):
                out.append(k)
                k += step
        return out, 1, 1
    keys = [key_of(g.rank, g.name, g.index) for g in signals]
    steps = [step_of(dk, dx) for dk, dx in st.signals]
    for lo, hi in spans:
        at = [key + step_of(lo * dk, lo * dx) for key, (dk, dx) in zip(keys, st.signals)]
        for _ in range(lo, hi):
            out += at
            at = [k + step for k, step in zip(at, steps)]
    return out, 1, 1


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
        local = [k for k in keys if k >> RANK_SHIFT == rank]
        if len(local) == len(keys):  # (all local, or none: the one list; mixed: split in order)
            _more(now, local, times, repeat)
        elif not local:
            _more(later, keys, times, repeat)
        else:
            _more(now, local, times, repeat)
            _more(later, [k for k in keys if k >> RANK_SHIFT != rank], times, repeat)
    return now, later


def _period_split(t: Task, first: int, n: int, rank: int) -> tuple[list[int], list[int]]:
    """:func:`flat_keys`'s keys of members ``first .. first+n-1`` of ``t`` (one signal cycling with a
    period), split into those of ``rank`` and the rest, each in member order: the members on ``rank``
    found by bisection among those of rank step ``rank - rank0`` (:func:`_cycle_moves`), not key by key."""
    st, g = t.step, t.signals[0]
    moves, on = _cycle_moves(t.count, st.period, st.rotate, *st.signals[0], *st.outer[0])
    key = key_of(g.rank, g.name, g.index)
    keys = [key + move for move in moves[first:first + n]]  # (flat_keys' keys, inline)
    mine = on.get(rank - g.rank, ())
    mine = mine[bisect_left(mine, first):bisect_left(mine, first + n)]
    held: list = keys  # (read as the int objects the list holds: not unboxed and boxed again for ``local``)
    local = [held[i - first] for i in mine]
    for i in reversed(mine):  # (from the last: the positions before it stay put)
        del keys[i - first]
    return local, keys


@lru_cache(maxsize=256)
def _cycle_moves(count: int, p: int, rotate: int, dk: int, dx: int, ok: int, ox: int
                 ) -> tuple[tuple[int, ...], dict[int, tuple[int, ...]]]:
    """Each member's key step (:func:`step_of`) where one signal cycles with the period ``p`` (as
    Task.member_signals), and the members by rank step: shared by tile rows (and cached across runs),
    so tuples: no caller can change them."""
    moves: list[int] = []
    on: dict[int, list[int]] = {}
    for i in range(count):
        a, b = divmod(i, p)
        if rotate and b >= p - rotate:  # (wrapped within its cycle)
            b -= p
        moves.append(step_of(b * dk + a * ok, b * dx + a * ox))
        on.setdefault(b * dk + a * ok, []).append(i)
    return tuple(moves), {k: tuple(v) for k, v in on.items()}


def _more(bumps: list[list], keys: list[int], times: int, repeat: int) -> None:
    """``keys`` (a list of the caller's own; each bumped ``times`` times, the list ``repeat`` times)
    after ``bumps``: joined to the last list where both bump each key once."""
    if not keys:
        return
    if times == 1 and repeat == 1 and bumps and bumps[-1][1] == 1 and bumps[-1][2] == 1:
        bumps[-1][0] += keys
        return
    bumps.append([keys, times, repeat])


class Cell:
    """One counter of the board: its ``count``, its ``waiters`` ((need, waiter) in wait order) or None,
    and their ``least`` need (:data:`NEVER` without). A class of its own, not a list, so the compiled
    core reads and adds its fields as typed ints (a list's items are objects: a generic add and
    comparison for each of the row's 1.2M bumps)."""

    __slots__ = ("count", "waiters", "least")

    def __init__(self, count: int, waiters: list[tuple[int, Any]] | None, least: int) -> None:
        self.count, self.waiters, self.least = count, waiters, least


class Block:
    """The cells of one (rank, signal name): ``cells[i]`` is the cell of index field ``lo + i`` (None
    where no key has one), ``spill`` those whose index lay too far from the rest for the list when
    they were made (by index field; None while there are none; the list may grow over them later),
    ``held`` how many it holds."""

    __slots__ = ("lo", "cells", "spill", "held")

    def __init__(self, lo: int, cell: Cell) -> None:
        self.lo, self.held = lo, 1
        self.cells: list[Cell | None] = [cell]
        self.spill: dict[int, Cell] | None = None


class CellTable:
    """The board's cells by key (:func:`key_of`): per rank, per name id, a :class:`Block` of cells
    listed by index. Why not a dict keyed by the int: this CPython's dict lookup costs about 350
    instructions with the boxing of the key, three list reads about a quarter of that, and the 2 x 8
    every-node GEMM+AR run reads the board 1.6M times. A block's list spans at most
    :data:`SPAN_SLACK` + :data:`SPAN_PER_CELL` slots per cell it holds (a GEMM tile row's flags on
    one rank take every eighth index of a range), so sparse indexes cost about what a dict's entries
    would; an index past that goes to the block's ``spill`` dict."""

    __slots__ = ("ranks",)

    def __init__(self) -> None:
        self.ranks: list[list[Block | None]] = []

    def get(self, key: int) -> Cell | None:
        """The cell of ``key``, or None where no bump or wait made one."""
        rank, ranks = key >> RANK_SHIFT, self.ranks
        if not 0 <= rank < len(ranks):
            return None
        names = ranks[rank]
        code = (key & LOW) >> NAME_SHIFT
        if code >= len(names):
            return None
        block = names[code]
        if block is None:
            return None
        index = key & INDEX_FIELD
        i, spill = index - block.lo, block.spill
        if 0 <= i < len(block.cells):
            cell = block.cells[i]
            if cell is not None or spill is None:
                return cell
        return None if spill is None else spill.get(index)  # (spilled before the list grew over it, maybe)

    def add(self, key: int, cell: Cell) -> Cell:
        """``cell`` as the cell of ``key``, which has none yet; returns it. A list grows to twice its
        length (within its limit) when an index falls past either end: a block's growth is a few
        allocations, not one per cell."""
        rank, code, index = key >> RANK_SHIFT, (key & LOW) >> NAME_SHIFT, key & INDEX_FIELD
        if rank < 0:  # (validate() refuses a signal on a rank outside the world)
            raise ValueError(f"signal key {key}: a negative rank")
        ranks = self.ranks
        while len(ranks) <= rank:
            ranks.append([])
        names = ranks[rank]
        while len(names) <= code:
            names.append(None)
        block = names[code]
        if block is None:
            names[code] = Block(index, cell)
            return cell
        block.held += 1
        cells = block.cells
        i, n = index - block.lo, len(cells)
        if 0 <= i < n:
            cells[i] = cell  # (a slot left empty)
            return cell
        limit = SPAN_SLACK + SPAN_PER_CELL * block.held
        if n <= i < limit:  # past the end
            gap: list[Cell | None] = [None] * (min(max(i + 1, 2 * n), limit) - n)
            cells.extend(gap)
            cells[i] = cell
        elif i < 0 and n - i <= limit:  # before the start
            front = min(max(-i, n), limit - n, block.lo)  # (no slot below index field 0)
            pad: list[Cell | None] = [None] * front
            block.cells = cells = pad + cells
            block.lo -= front
            cells[i + front] = cell
        else:
            if block.spill is None:
                block.spill = {}
            block.spill[index] = cell
        return cell

    def values(self) -> list[Cell]:
        """Every cell (by rank, name and index: :meth:`~mkernel.sim.engine.Model.blocked` orders what it
        reads of them itself)."""
        out: list[Cell] = []
        for names in self.ranks:
            for block in names:
                if block is not None:
                    out += [cell for cell in block.cells if cell is not None]
                    out += block.spill.values() if block.spill is not None else ()
        return out


class SignalBoard:
    """The signal counters of one call (one epoch). On the GPU every value is stamped with the epoch
    of the call that wrote it, so what earlier calls left reads as 0 and nothing is zeroed between
    calls; a board lives for one call, so every value it holds is of that call, and it keeps plain
    counts (``epoch`` names the call in errors). A bump hands every waiter whose count it reaches to
    ``release``; ``wait_key`` returns False when the count already holds, so the common case costs
    nothing. Counters are keyed by ints (:func:`key_of`), so the members of a group reach theirs by
    a sum, without building a Signal or a tuple each. Each key has one :class:`Cell` (``cells``, a
    :class:`CellTable`; a key never bumped nor waited on has none, and counts 0): a bump finds it
    with one lookup, and one comparison with its waiters' least need tells whether it releases any
    (most do not: a GEMM tile row's flag waits for all 8 ranks' bumps)."""

    def __init__(self, epoch: int, release: Callable[[Any], None], home: list[int] | None = None) -> None:
        self.epoch, self.release = epoch, release
        self.home = home  # a folded run's ranks (sim/localfold.py): each key's rank is its base's
        self.cells = CellTable()  # key -> its cell

    def count(self, sig: Signal) -> int:
        cell = self.cells.get(key_of(sig.rank, sig.name, sig.index))
        return 0 if cell is None else cell.count

    def bump_keys(self, keys: list[int], times: int = 1, repeat: int = 1) -> None:
        """Each key of ``keys`` bumped ``times`` times, in order, the list ``repeat`` times over (one
        call for a run's bumps: the hottest code of a run). A bump of ``times`` > 1 is ``times``
        bumps of one: its waiters are released as those would release them, by the count they wait
        for (in wait order among equal counts). What a bump does that anything sees is the values it
        leaves and the waiters it releases, in order; releases come only from keys with waiters, so a
        list repeated whose keys have none (a copy's 7 fixed flags) is bumped ``repeat * times`` at once."""
        cells, release = self.cells, self.release
        if self.home is not None:  # (two bumps of one counter in a row are one of two: the same releases)
            home = self.home
            keys = [(home[k >> RANK_SHIFT] << RANK_SHIFT) + (k & LOW) for k in keys]
        if repeat > 1:  # each key's cell found once (a missing one made at 0: what no cell counts)
            found = [cells.get(key) or cells.add(key, Cell(0, None, NEVER)) for key in cast(list, keys)]
            for fcell in found:
                if fcell.waiters is not None:
                    found = found * repeat
                    break
            else:
                times *= repeat
            for fcell in found:
                value = fcell.count = fcell.count + times
                if value >= fcell.least:
                    self._wake(fcell, value, times)
            return
        for key in cast(list[int], keys):
            cell = cells.get(key)
            if cell is None:  # (no waiter before its first bump or wait)
                cells.add(key, Cell(times, None, NEVER))
                continue
            value = cell.count = cell.count + times
            if value < cell.least:  # (most bumps: no waiter, or none whose count it reaches)
                continue
            waiting = cell.waiters
            if waiting is not None and len(waiting) == 1:  # the common release, inline (164k in the row)
                cell.waiters, cell.least = None, NEVER
                release(waiting[0][1])
            else:
                self._wake(cell, value, times)

    def _wake(self, cell: Cell, value: int, times: int) -> None:
        """The waiters of ``cell`` whose count its bump of ``times`` to ``value`` reaches, released."""
        still: list[tuple[int, Any]] = []
        due: list[tuple[int, Any]] = []
        for need, waiter in cell.waiters or ():
            (due if need <= value else still).append((need, waiter))
        cell.waiters, cell.least = (still, min(map(_need, still))) if still else (None, NEVER)
        if times > 1 and len(due) > 1:
            due.sort(key=_need)  # (stable)
        for _, waiter in due:
            self.release(waiter)

    def wait_key(self, key: int, need: int, waiter: object) -> bool:
        """Whether ``key`` (:func:`key_of`) has yet to reach ``need``; if so, ``release(waiter)`` is
        called when it does (from the bump, so it should only schedule work)."""
        cell = self.cells.get(key)
        if cell is None:
            if need <= 0:
                return False
            self.cells.add(key, Cell(0, [(need, waiter)], need))
            return True
        if cell.count >= need:
            return False
        if cell.waiters is None:
            cell.waiters, cell.least = [(need, waiter)], need
        else:
            cell.waiters.append((need, waiter))
            if need < cell.least:
                cell.least = need
        return True
