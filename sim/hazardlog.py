"""The hazard tracker of a simulated run: calls logged while it runs, hazards decided at its end.

A tracked every-node run makes a check and a landing for each of its ~200k runs of members (the 2 x 8
GEMM+AR 32768^2 run); counting arrivals per cell at each call (:class:`~mkernel.sim.hazards.ArrivalTracker`)
cost a few numpy calls each, about a fifth of the run. Nothing in a run reads the tracker's verdict
before the run ends, so :class:`LoggedTracker` only appends each call to a log, and :meth:`~LoggedTracker.finish`
decides from the whole log at once whether any read found fewer arrivals than it needs (the same count
the live tracker compares: the landings of each cell logged before the check, against the cell's
``need``). Where one did, the log is replayed through the live tracker's own methods, call for call,
so the hazards reported are exactly the live tracker's (their members, regions, pending writers and
times); a run without hazards, the timing case, never replays.

:mod:`mkernel.sim.explore` reads hazards while it explores, so it keeps the live tracker.
"""
from __future__ import annotations

import struct
from itertools import repeat
from operator import attrgetter

import numpy as np

from mkernel.ir import BufferKind, Schedule, Task
from mkernel.members import RegionTable, int_array, ragged

from .calllog import LANDED, CallLog
from .cellgrid import Side
from .hazards import ArrivalTracker


PACKED_BITS = 63  # a start and its place sort packed in one int64 below this many bits (else the argsort itself)


class LoggedTracker(ArrivalTracker):
    """:class:`~mkernel.sim.hazards.ArrivalTracker`'s calls, logged (see the module); ``hazards`` is
    filled by :meth:`finish`."""

    def __init__(self, s: Schedule, regions: RegionTable | None = None) -> None:
        super().__init__(s, regions)
        self.log = CallLog()  # (the engine appends to it: sim/calllog.py)

    def landed_writes(self, task: Task, first: int = 0, n: int | None = None) -> None:
        self.log.landed_writes(task, first, n)

    def check_reads(self, task: Task, now_us: float, first: int = 0, n: int | None = None) -> None:
        self.log.check_reads(task, now_us, first, n)

    def check_outputs_landed(self, rank: int, now_us: float) -> None:
        self.log.check_outputs_landed(rank, now_us)

    def finish(self) -> None:
        """Decide the run's hazards from its log (replayed through the live tracker where any read
        or rank's end found bytes missing)."""
        calls = self._calls()
        if self._verdict(*calls):
            self._replay(_as_rows(*calls))
        self.log.items, self.log.ends = [], []  # (in place: the model's log is this one)

    def _calls(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The log's calls as columns (entry, first member, members, time or LANDED): an entry by its
        position in the schedule, a plain member made by :meth:`member` as its entry's member (its
        id is its expanded id), members left unnumbered as all from ``first`` on. (Columns: the
        verdict reads the entries' spans and the landings apart, each by a 1-D pass.)"""
        log = self.log.items
        size = len(log) // 4
        tasks, first, n, times = (log[f::4] for f in range(4))
        p = self._entries(tasks)
        first = int_array(first)
        try:  # (packed where every call counted its members, as a tracked run's do: a third of the float path)
            n, unset = int_array(n), None
        except TypeError:
            n = np.array(n, np.float64)  # (None, all from ``first`` on, reads as nan)
            unset = np.isnan(n)
            n = np.where(unset, 0.0, n).astype(np.int64)
        plain = np.flatnonzero(p < 0)
        if plain.size:
            uid0 = self.cells.uid0
            ids = np.fromiter(map(attrgetter("id"), map(tasks.__getitem__, plain.tolist())), np.int64, plain.size)
            p[plain] = np.searchsorted(uid0, ids, "right") - 1
            first[plain], n[plain] = ids - uid0[p[plain]], 1
            if unset is not None:
                unset[plain] = False
        if unset is not None:
            n[unset] = (np.diff(self.cells.uid0)[p] - first)[unset]
        column = _floats(times)
        if isinstance(column, list):  # (numpy converts what struct would not, as it did in a column of the rows)
            floats = np.empty(size)
            floats[:] = column
            column = floats
        return p, first, n, column

    def _entries(self, tasks: list) -> np.ndarray:
        """Each logged task's position in the schedule (-1: a plain member made by :meth:`member`):
        its id where the schedule holds that very object there (ids are positions in a valid
        schedule), else looked up by object (:attr:`_pos`, made only then). A third of the time of
        looking every call up in ``_pos`` (170k calls on the 2 x 8 GEMM+AR every-node run: 17 ms),
        whose keys, the objects' ids, are large ints made afresh for each call."""
        entries = self.schedule.tasks
        try:  # (a list comprehension: its subscripts and attribute reads specialize)
            p = int_array([t.id if entries[t.id] is t else -1 for t in tasks])  # (packed: mkernel.members.int_array)
        except IndexError:  # (an id past the entries: a plain member's, its expanded id)
            n = len(entries)
            p = int_array([t.id if 0 <= t.id < n and entries[t.id] is t else -1 for t in tasks])
        rest = np.flatnonzero(p < 0)
        if rest.size:  # (plain members, or an entry away from its id's position)
            p[rest] = list(map(self._pos.get, map(id, map(tasks.__getitem__, rest.tolist())), repeat(-1)))
        return p

    def _verdict(self, p: np.ndarray, first: np.ndarray, n: np.ndarray, time: np.ndarray) -> bool:
        """Whether some logged check (the calls' columns: :meth:`_calls`) found a cell with fewer arrivals
        than it needs, or a rank's end an output cell short."""
        lands = time < 0
        c = self.cells
        # each side's calls by 1-D compress (a 2-D mask's copy of rows cost twice); the log positions 32-bit where
        # they fit, so are the cell-sized arrays made from them (each cell's landing and each read cell's check)
        place = np.int32 if len(time) < 2 ** 31 else np.int64
        at = np.flatnonzero(lands).astype(place)
        cells, at = self._spans(*(np.compress(lands, x) for x in (p, first, n)), at, c.write)
        landings = _Landings(self._wcell if cells is None else self._wcell[cells], at, c.total)
        checks = ~lands
        seq = np.flatnonzero(checks).astype(place)  # (a read that repeats another meets what it does)
        idx, at = self._spans(*(np.compress(checks, x) for x in (p, first, n)), seq, c.distinct)
        cell, need = c.distinct.cell, c.distinct_need
        if idx is not None:
            cell, need = cell[idx], need[idx]
        if landings.fewer(cell, need, at):
            return True
        for rank, at, _ in self.log.ends:
            for b in self.schedule.buffers:
                g = c.grid.get((b.name, rank))
                if b.kind is BufferKind.OUTPUT and g is not None:
                    lo, hi = c.grid_base[g], c.grid_base[g + 1]  # (a grid's cells: its expected ones a slice)
                    if landings.fewer(np.arange(lo, hi, dtype=np.int64), c.expected[lo:hi], at):
                        return True
        return False

    @staticmethod
    def _spans(p: np.ndarray, first: np.ndarray, n: np.ndarray, seq: np.ndarray, side: Side):
        """Every cell index (into ``side.cell``) the logged spans (entry ``p``'s ``n`` members from
        ``first``) cover, and the log position of the span each is of (in log order); or, where the
        spans cover every index once (a run that checked each member's reads once and landed its
        writes once: the timing case), None and the positions of the indices in their order, without
        listing the indices."""
        k = side.n[p]
        lo = side.base[p] + first * k
        a, b = side.start[lo], side.start[lo + n * k]
        if (b - a).sum() == len(side.cell):  # (a cover's lengths add up to the whole: the cheap test first)
            some = np.flatnonzero(b > a)
            # the spans in order of their starts, ties in log order (a stable argsort's), by sorting each start
            # and its place as one number (a quicksort of numbers: half the instructions of the argsort)
            shift = max(len(some) - 1, 0).bit_length()
            if len(side.cell).bit_length() + shift < PACKED_BITS:
                key = np.sort((a[some].astype(np.int64) << shift) | np.arange(len(some)))  # (starts: the cells' numbers)
                order, sa = some[key & ((1 << shift) - 1)], key >> shift
            else:  # (starts and places past 62 bits together: the argsort itself)
                order = some[np.argsort(a[some], kind="stable")]
                sa = a[order]
            sb = b[order]
            if (sa[1:] == sb[:-1]).all():  # end to end, as long as the whole, within it: from 0 to its end
                return None, np.repeat(seq[order], sb - sa)
        which, off = ragged(b - a)
        return a[which] + off, seq[which]

    def _replay(self, rows: np.ndarray) -> None:
        """The log's calls (``rows``: :func:`_as_rows` of :meth:`_calls`), in order, through the live tracker:
        its hazards, exactly."""
        tasks, ends, e = self.schedule.tasks, self.log.ends, 0
        live = ArrivalTracker
        for i, (p, first, n, now) in enumerate(rows.tolist()):
            p, first, n = int(p), int(first), int(n)
            while e < len(ends) and ends[e][1] == i:
                live.check_outputs_landed(self, ends[e][0], ends[e][2])
                e += 1
            if now == LANDED:
                live.landed_writes(self, tasks[p], first, n)
            else:
                live.check_reads(self, tasks[p], now, first, n)
        for rank, _, now in ends[e:]:
            live.check_outputs_landed(self, rank, now)


def _as_rows(p: np.ndarray, first: np.ndarray, n: np.ndarray, time: np.ndarray) -> np.ndarray:
    """The calls' columns (:meth:`LoggedTracker._calls`) as rows, one a call."""
    rows = np.empty((len(p), 4))
    rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3] = p, first, n, time
    return rows


def _floats(values: list) -> np.ndarray | list:
    """``values`` packed as 64-bit floats by :func:`struct.pack_into` (its conversion is Python's
    ``float()``, as numpy's of a list; a third of the instructions of assigning the list to a column,
    which finds each item's type first), or the list itself where one is no number (numpy decides)."""
    out = np.empty(len(values))
    try:
        struct.pack_into(f"={len(values)}d", out, 0, *values)
    except (struct.error, OverflowError):
        return values
    return out


class _Landings:
    """Each cell's landings by log position, in log order: ``when[first[c] + j]`` is where cell c's
    (j+1)-th landing was logged, ``count[c]`` how many it had. A cell landed once (every cell of the
    2 x 8 GEMM+AR's, whose outputs are written once) takes its one slot directly; only the landings
    of cells landed more often are sorted, by cell and then by log position (they come in log order,
    or span by span in cell order: :meth:`LoggedTracker._spans`; the sort is stable, so the landings
    of one span on one cell keep their order either way). Where every cell landed exactly once (a
    run without hazards of a schedule that writes each cell once), ``first`` is every cell's own
    index, so ``when`` is indexed by cell (``once``: told by the cells left unmet, not by counting them)
    and :meth:`fewer` reads it so; ``first`` and ``count`` are not made (each a pass over the
    million cells of that GEMM+AR)."""

    def __init__(self, cell: np.ndarray, at: np.ndarray, total: int) -> None:
        cell = cell.astype(np.int64)
        if len(cell) == total:  # as many landings as cells: each landed once where none is left unmet by them
            self.when = np.full(total, -1, at.dtype)  # (a cell met twice leaves another unmet; positions are >= 0)
            self.when[cell] = at
            self.once = not total or bool(self.when.min() >= 0)
            if self.once:
                return
        self.once = False
        self.when = np.empty(len(cell), at.dtype)
        self.count = np.bincount(cell, minlength=total)
        self.first = np.zeros(total + 1, np.int64)
        np.cumsum(self.count, out=self.first[1:])
        slot = self.first[cell]
        again = np.flatnonzero(self.count[cell] > 1)
        if again.size:  # the j-th landing of a cell landed more than once goes j slots on
            order = again[np.lexsort((at[again], cell[again]))]  # (stable: one span's landings keep their order)
            sorted_cells = cell[order]
            start = np.flatnonzero(np.r_[True, sorted_cells[1:] != sorted_cells[:-1]])
            j = np.arange(order.size) - np.repeat(start, np.diff(np.r_[start, order.size]))
            slot[order] += j
        self.when[slot] = at

    def fewer(self, cell: np.ndarray, need: np.ndarray, at: np.ndarray | int) -> bool:
        """Whether some cell of ``cell`` had fewer than its ``need`` landings logged before position ``at``
        (its need-th landing missing, or logged at ``at`` or later)."""
        if self.once:  # (every cell landed once: a need above 1 is missing; a need of 1 reads the cell's landing)
            if not need.size:
                return False
            # (a need that is one number viewed over every cell, Cells' ones, read as that number: numpy reduces
            # such a view item by item)
            one = need.strides == (0,)
            if (need[0] if one else need.max()) > 1:
                return True
            late = np.take(self.when, cell) >= at  # (np.take: see mkernel.sim.gridedges.Slots.index)
            return bool((late & (need > 0) if (need[0] if one else need.min()) < 1 else late).any())
        want = need > 0
        cell, need = cell[want].astype(np.int64), need[want]
        at = np.broadcast_to(at, want.shape)[want]
        missing = need > self.count[cell]
        if missing.any():
            return True
        return bool((self.when[self.first[cell] + need - 1] >= at).any())
