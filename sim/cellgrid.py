"""The hazard tracker's grids (:mod:`mkernel.sim.hazards`): every member's regions as grid cells.

Each (buffer, rank) that a non-input region touches gets a compressed grid whose row and column
edges are every edge of every region used there, so a region is always a whole rectangle of cells.
All the grids are laid end to end in one flat array of cells.

A schedule's tracked regions (those of non-input buffers) are listed as *rows*, reads and writes
apart: entry after entry, member after member, each member's regions in task order (the order of
the expanded schedule). So the rows of members ``first .. first + n - 1`` of one entry are one
slice, and so are their cells (each row's cells, row-major over its rectangle, one row after the
other). Members' regions come from the group's :class:`~mkernel.ir.Step` by index arithmetic on
numpy arrays (:mod:`mkernel.members`): no member is made as a Task or a Region. The 2 x 8 GEMM+AR
32768^2 every-node build (737k members in 53k entries, 2.3M rows) is about a hundred numpy passes
over the rows, a millisecond or two each (0.23-0.25 s warm), so the passes are kept few: a row's
bounds are keyed from its record where it steps (:class:`Stepped`), not listed, and looked up
as they are marked; its rectangle is taken as edge indices among every grid's; and where its row
bounds are its record's (most rows), so are its height and first cell row. (A side's rows by
record, the reads that repeat and the pairs that may meet: :mod:`mkernel.sim.gridrows`.)
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from mkernel.ir import BufferKind, Op, Region, Schedule
from mkernel.members import RegionTable, int_array, member_slots, ragged, read_regions

from .gridedges import Edges, Span, Stepped
from .gridrows import Rows, pairs, repeats


@dataclass
class Side:
    """The rows of one side, reads or writes (see the module). Each row's grid is listed where first
    read (reports, tests), from its record's where no row steps in rank: a run without hazards never reads it."""

    base: np.ndarray  # per entry, and one past the last: its first row
    n: np.ndarray  # per entry: tracked regions per member
    start: np.ndarray  # per row, and one past the last: where its cells begin in ``cell``
    cell: np.ndarray  # every row's cells, in row order
    listed: np.ndarray | None  # per row: its grid, where listed already
    by_record: tuple[np.ndarray, np.ndarray] | None = None  # else each record's grid and each entry's members

    @cached_property
    def grid(self) -> np.ndarray:
        """Per row: its grid."""
        if self.listed is not None:
            return self.listed
        grid, counts = self.by_record
        return grid[member_slots(self.n, counts)[1]]


class Cells:
    """Grids, expected arrivals and each row's cells of one schedule (see the module).

    ``need`` (one per read cell): the arrivals a member's read of that cell waits for, the writes
    the schedule makes there less the member's own (an in-place update does not wait on itself).
    ``regions``: :func:`mkernel.members.read_regions` of ``s``, where it was read already (by
    ``validate()``: the 2 x 8 GEMM+AR 32768^2 every-node build's 623k regions take 0.3-0.45 s to read).

    A read that repeats the one before it in its task (a broadcast reads its source once per
    destination: 6 of the 2 x 8 GEMM+AR's 7 reads per copy, a third of its read rows) has the same
    cells and need, so the rows are made for the other reads only (``distinct``, ``distinct_need``:
    all a verdict reads, as a repeat meets nothing its first does not) and every read's (``read``,
    ``need``) copied from theirs where first asked for (the live tracker, a replay, the tests)."""

    def __init__(self, s: Schedule, regions: RegionTable | None = None) -> None:
        recs, f, code = regions or read_regions(s)
        entries = len(s.tasks)
        inputs = [code[b.name] for b in s.buffers if b.kind is BufferKind.INPUT]
        tracked = ~np.isin(recs[:, 0], inputs)
        sides = (tracked & f["read"], tracked & ~f["read"])
        entry = [f["entry"][side] for side in sides]
        per = [np.bincount(e, minlength=entries) for e in entry]
        self.read_pos = f["k"][sides[0]]  # per tracked read: its index in Task.reads
        self.read_first = np.zeros(entries + 1, np.int64)  # per entry: its first tracked read in read_pos
        np.cumsum(per[0], out=self.read_first[1:])
        put = Op.PUT  # each entry's count and whether it is a put, read in one pass over the entries (one number each)
        counts = int_array([2 * t.count + (t.op is put) for t in s.tasks])  # (a list comprehension: members.int_array)
        puts = (counts & 1).astype(bool)
        counts >>= 1
        # each side's records copied once (compress: 5x a mask's speed), in the table's own numbers: 32-bit
        # where they fit, half the fresh pages of 64-bit copies (the 2 x 8 GEMM+AR every-node row: 38 MB),
        # and the rows' numbers made from them 64-bit all the same, by the 64-bit offsets and grid starts
        # they meet (the two sums of records' numbers alone, _layout's grid keys and Stepped's widths, cast)
        kept = [np.compress(side, recs, axis=0) for side in sides]
        self._per_read = per[0]
        self._repeat = repeats(kept[0], entry[0])
        if self._repeat is not None:  # the reads' rows: the distinct reads' only
            first = ~self._repeat
            kept[0], entry[0] = np.compress(first, kept[0], axis=0), entry[0][first]
            per[0] = np.bincount(entry[0], minlength=entries)
        pair = pairs(list(zip(kept, entry)), per, puts, len(code))
        self.uid0 = np.zeros(len(counts) + 1, np.int64)  # each entry's member 0 in the expanded schedule
        np.cumsum(counts, out=self.uid0[1:])
        sides = [Rows(r, n, counts) for r, n in zip(kept, per)]
        del kept
        self._layout(s, sides, {c: name for name, c in code.items()})
        which, i = ragged(counts[pair[:, 0]])  # every member of each pair's entry: its read and write rows
        met = [rows.base[pair[which, 0]] + i * rows.n[pair[which, 0]] + pair[which, q]
               for rows, q in zip(sides, (1, 2))]
        done, rects = [], []
        while sides:  # side by side, each one's rows let go once its cells are made (a third less memory at the peak)
            rows = sides.pop(0)
            at = met[len(done)]
            if len(at):  # (the pairs' rows' rectangles, for _own; a second bound as an int: the first plus it)
                spans = [x for axis in (1, 2) for x in _picked(*rows.span[axis].full(rows.rec), at)]
                rects.append((*spans, rows.grid_at(at)))
            done.append(Side(rows.base, rows.n, *self._cells(rows), rows.grid,
                             None if rows.grid is not None else (rows.grid_of_record, counts)))
            del rows
        self.distinct, self.write = done
        self.expected = _counts(self.write.cell, self.total)
        if len(self.write.cell) == self.total and np.count_nonzero(self.expected) == self.total:
            # every cell written once: each count 1, none looked up, and the counts kept as a read-only view of
            # one 1 (the 2 x 8 GEMM+AR every-node row's 7.5 MB of ones, kept through its run, not made)
            self.expected = _ones(self.total)
            expected = _ones(len(self.distinct.cell))
        else:
            expected = np.take(self.expected, self.distinct.cell)  # (np.take: see gridedges.Slots.index)
        own = self._own(self.distinct, met[0], rects)
        self.distinct_need = expected if own is None else expected - own
        self.expected.flags.writeable = self.distinct_need.flags.writeable = False  # (read-only on every shape)

    @property
    def read(self) -> Side:
        return self._every_read[0]  # (every tracked read's rows: see the class)

    @property
    def need(self) -> np.ndarray:
        return self._every_read[1]  # (per cell of ``read``: see the class)

    @cached_property
    def _every_read(self) -> tuple[Side, np.ndarray]:
        """(:attr:`read`, :attr:`need`): the distinct reads' rows, each read's row taken from its
        distinct read's (row ``base + i n + j`` of entry e's member i, j its distinct read)."""
        d, repeat = self.distinct, self._repeat
        if repeat is None:
            return d, self.distinct_need
        per = self._per_read
        base, rec, i = member_slots(per, np.diff(self.uid0))
        e = np.repeat(np.arange(len(per)), per)  # per read: its entry, and its distinct read's place there
        j = np.cumsum(~repeat) - 1 - (np.cumsum(d.n) - d.n)[e]
        row = (d.base[:-1][e] + j)[rec] + i * d.n[e][rec]
        size = np.diff(d.start)[row]
        start = np.zeros(len(row) + 1, _index_type(size))  # (32-bit where they fit: see _cells)
        np.cumsum(size, dtype=start.dtype, out=start[1:])
        cells = np.arange(start[-1], dtype=np.int64) + np.repeat(d.start[row] - start[:-1], size)
        return Side(base, per, start, d.cell[cells], d.grid[row]), self.distinct_need[cells]

    def _layout(self, s: Schedule, sides: list[Rows], names: dict[int, str]) -> None:
        """The grids: one per (buffer, rank) of some row, their edges, and where their cells begin.
        A row whose rank does not step is in its record's grid."""
        world = 1 + max([s.world - 1] + [int(x.max()) for rows in sides
                                         for x in (rows.recs[:, 1], rows.ranks) if x.size])
        keys = [(rows.recs[:, 0].astype(np.int64) * world + rows.recs[:, 1],
                 rows.recs[rows.ranked_records, 0].astype(np.int64) * world + rows.ranks) for rows in sides]
        used = np.zeros(len(names) * world, np.int64)  # (a few hundred keys: marked, not sorted)
        for k in keys:
            used[np.concatenate(k)] = 1
        uniq = np.flatnonzero(used)
        self.grid = {(names[k // world], k % world): g for g, k in enumerate(uniq.tolist())}
        self.grid_rank = uniq % world
        number = np.zeros(len(used), np.int64)
        number[uniq] = np.arange(len(uniq))
        for rows, (own, moved) in zip(sides, keys):
            rows.grid_of_record = number[own]
            if len(rows.ranked):  # (a row that steps in rank has a grid of its own: every row's listed)
                rows.grid = rows.grid_of_record[rows.rec]
                rows.grid[rows.ranked] = number[moved]
        self.rows, self.cols = (self._edges(sides, axis, len(uniq)) for axis in (1, 2))
        self.grid_base = np.zeros(len(uniq) + 1, np.int64)
        np.cumsum(self.rows.cells * self.cols.cells, out=self.grid_base[1:])
        self.total = int(self.grid_base[-1])

    def _edges(self, sides: list[Rows], axis: int, count: int) -> Edges:
        """The edges along ``axis`` (1: rows, 2: columns) of the ``count`` grids: every record's
        (member 0's), and those of the rows that step in rank or along the axis (the others have
        their record's edges there: four fifths of the 2 x 8 GEMM+AR's row edges); and each side's
        rows there as edge indices (``Rows.span``), the values and keys let go as they are looked up."""
        grids, values, wanted, stepped, size, where = [], [], [], [], 0, []
        for rows in sides:
            stepping, how = rows.along(axis)
            size += 2 * (len(rows.recs) + stepping)
            where.append((len(values), how if isinstance(how, Stepped) else how[0]))
            grids += [rows.grid_of_record] * 2
            values += [rows.recs[:, 2 * axis], rows.recs[:, 2 * axis + 1]]
            if isinstance(how, Stepped):  # (every row keyed: no record's looked up)
                wanted += [False, False]
                stepped.append(how)
            else:
                wanted += [True] * 4
                grids += [how[1]] * 2
                values += [how[2], how[3]]
        edges, found = Edges.found(grids, values, count, size, wanted, stepped)
        rest = iter(found[len(wanted):])  # (the stepped sides' bounds, in order)
        for rows, (j, at) in zip(sides, where):
            rows.span[axis] = (Span(None, None, None, next(rest), next(rest)) if isinstance(at, Stepped)
                               else Span(*found[j:j + 2], at, *found[j + 2:j + 4]))
        return edges

    def _cells(self, rows: Rows) -> tuple[np.ndarray, np.ndarray]:
        """(start, cell) of a side (see :class:`Side`). A row's cells are ``high`` cell rows of
        ``wide`` cells, the first ``part + b0``: its grid's first cell, plus its first cell row
        times the grid's width, plus its first cell column (each an edge index among every grid's
        less its grid's ``first``: ``corner`` takes the grid's off). Where a row's bounds along the
        rows are its record's, so are ``high`` and ``part``. Each row's first cell is repeated over
        its cells, and only the rows of more than one cell (1.4% of the 2 x 8 GEMM+AR's) get the
        rest worked out."""
        rec, width = rows.rec, self.cols.cells
        corner = self.grid_base[:-1] - self.rows.first[:-1] * width - self.cols.first[:-1]  # per grid
        a, b = rows.span.pop(1), rows.span.pop(2)
        dtype = np.int32 if self.total < 2 ** 31 else np.int64  # (cells, and so each row's size and first cell)
        if a.at is None:
            g = rows.grid_at()
            high = np.full(len(rec), max(a.x1, 0)) if isinstance(a.x1, int) else np.maximum(a.x1 - a.x0, 0)
            part = (corner[g] + a.x0 * width[g]).astype(dtype)
        else:
            own = rows.grid_of_record
            high, part = np.maximum(a.hi - a.lo, 0), np.take((corner[own] + a.lo * width[own]).astype(dtype), rec)
            high = _by_record(rows, high)
            ga = rows.grid_at(a.at)
            high[a.at], part[a.at] = np.maximum(a.x1 - a.x0, 0), corner[ga] + a.x0 * width[ga]
        b0, b1 = b.full(rec)
        if isinstance(b1, int):  # (every row's width the same: a stepped side's of one width, Span)
            wide = max(b1, 0)
            size = high.astype(dtype, copy=False) if wide == 1 else np.multiply(high, wide, dtype=dtype)
        else:
            wide = np.subtract(b1, b0)
            np.maximum(wide, 0, out=wide)
            size = np.multiply(high, wide, dtype=dtype)  # (0 where either is; at most the cells, as a cell number)
        del b1, high
        # (empty: every item written, no row-sized memset; 32-bit where the rows' cells listed, the last start,
        # fit: the 2 x 8 GEMM+AR's two sides' 14 MB of 64-bit starts, kept through the run, made 7)
        start = np.empty(len(size) + 1, _index_type(size))
        start[0] = 0
        np.cumsum(size, dtype=start.dtype, out=start[1:])
        part += b0  # (in place: no fresh pages)
        del b0
        more = np.flatnonzero(size > 1)
        cell = _repeat(part, size, more)
        if len(more):  # cell t of a row: t // w rows and t % w columns on (w: the row's width in cells)
            row, t = ragged(size[more])
            w = wide if isinstance(wide, int) else wide[more][row]
            u = t // w
            cell[start[more][row] + t] += (u * width[rows.grid_at(more)][row] + (t - u * w)).astype(dtype)
        return start, cell

    @cached_property
    def write_once(self) -> list[bool]:
        """Per entry: whether its members' writes cover no cell twice (so a run's land as one add).
        Only cells that the schedule writes more than once (``expected``) can be met twice in one
        entry; their (entry, cell) pairs, sorted as one number, show the repeats. (Read only by
        the live tracker: a logged run with no hazards never asks.)"""
        w, total, entries = self.write, max(self.total, 1), len(self.uid0) - 1
        entry = np.repeat(np.arange(entries, dtype=np.int64), np.diff(w.start[w.base]))  # per cell
        again = self.expected[w.cell] > 1
        key = np.sort(entry[again] * total + w.cell[again])
        once = np.ones(entries, bool)
        once[key[1:][np.diff(key) == 0] // total] = False
        return once.tolist()

    @staticmethod
    def _own(read: Side, r: np.ndarray, rects: list) -> np.ndarray | None:
        """Per cell of ``read``: how many of its member's own writes cover it (see ``need``; None: none), from the
        pairs' read rows ``r`` and each side's rectangles and grids of the pairs' rows (as edge
        indices among every grid's: only differences and comparisons of one grid's are taken)."""
        if not len(r):
            return None  # (none: the need is what the schedule writes, no row-sized zeros subtracted)
        own = np.zeros(len(read.cell), np.int32)
        (ra0, ra1, rb0, rb1, rg), (wa0, wa1, wb0, wb1, wg) = rects
        lo_a, hi_a, lo_b, hi_b = np.maximum(ra0, wa0), np.minimum(ra1, wa1), np.maximum(rb0, wb0), np.minimum(rb1, wb1)
        keep = (rg == wg) & (lo_a < hi_a) & (lo_b < hi_b)
        r, ra0, rb0, rb1, lo_a, hi_a, lo_b, hi_b = (x[keep] for x in (r, ra0, rb0, rb1, lo_a, hi_a, lo_b, hi_b))
        j, t = ragged(read.start[r + 1] - read.start[r])
        width = (rb1 - rb0)[j]
        u = t // np.maximum(width, 1)
        a, b = ra0[j] + u, rb0[j] + (t - u * width)
        inside = (a >= lo_a[j]) & (a < hi_a[j]) & (b >= lo_b[j]) & (b < hi_b[j])
        np.add.at(own, (read.start[r][j] + t)[inside], 1)
        return own

    def read_of(self, p: int, q: int) -> int:
        """The index in ``Task.reads`` of entry ``p``'s ``q``-th tracked read."""
        return int(self.read_pos[self.read_first[p] + q])

    def rect(self, r: Region) -> tuple[int, int, int, int]:
        """Region ``r``'s cell rectangle in its grid: first and end cell row, first and end cell column."""
        g = self.grid[(r.buffer, r.rank)]
        return (int(self.rows.local(g, r.row0)), int(self.rows.local(g, r.row1)),
                int(self.cols.local(g, r.col0)), int(self.cols.local(g, r.col1)))


def _counts(cell: np.ndarray, total: int) -> np.ndarray:
    """``np.bincount(cell, minlength=total)`` as 32-bit numbers (``cell``: each below ``total``, none negative),
    marked where no cell is in it twice (a schedule that writes each cell once, as the 2 x 8 GEMM+AR's: each
    cell's count its mark, by as many cells marked as listed), in two thirds of the time of counting."""
    mark = np.zeros(total, np.int32)
    mark[cell.astype(np.int64)] = 1  # (64-bit: half the time of a scatter by a 32-bit index)
    if np.count_nonzero(mark) == len(cell):
        return mark
    return np.bincount(cell, minlength=total).astype(np.int32)


def _ones(n: int) -> np.ndarray:
    """``np.ones(n, np.int32)`` as a read-only view of a single 1 (no pages; read as the array is)."""
    return np.broadcast_to(np.ones(1, np.int32), (n,))


def _by_record(rows: Rows, x: np.ndarray) -> np.ndarray:
    """``x`` (per record) of each row: ``np.take(x, rows.rec)``, where most records' are one number (a row's tiles
    high: all but 2% of the 2 x 8 GEMM+AR's rows) that number filled in, and only the others' rows looked up."""
    if not len(x):
        return np.take(x, rows.rec)
    odd = np.flatnonzero(x != x[0])
    if not len(odd):
        return np.full(len(rows.rec), x[0])
    if 4 * int(rows.members[odd].sum()) > len(rows.rec):
        return np.take(x, rows.rec)
    out = np.full(len(rows.rec), x[0])
    at, which, _ = rows._rows_of(odd)
    out[at] = x[odd][which]
    return out


def _picked(x0: np.ndarray, x1: np.ndarray | int, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``at``'s two bounds of :meth:`~mkernel.sim.gridedges.Span.full` (``x1`` an int: ``x0`` plus it)."""
    return x0[at], x0[at] + x1 if isinstance(x1, int) else x1[at]


def _repeat(x: np.ndarray, size: np.ndarray, more: np.ndarray) -> np.ndarray:
    """``np.repeat(x, size)`` (``more``: the items of ``size`` above 1): where none is 0, ``x`` with their extra
    copies inserted (~17 instructions an item; np.repeat's loop copies item by item, ~29)."""
    if not len(x) or size.min() < 1:
        return np.repeat(x, size)
    return np.insert(x, np.repeat(more + 1, size[more] - 1), np.repeat(x[more], size[more] - 1))


def _index_type(size: np.ndarray) -> type:
    """The integer type of the starts of rows of ``size`` cells each (a running sum): 32-bit where
    their total fits, else 64-bit (summed in 64 bits to tell)."""
    return np.int32 if int(np.add.reduce(size, dtype=np.int64)) < 2 ** 31 else np.int64
