"""The hazard tracker's grids (:mod:`mkernel.sim.hazards`): every member's regions as grid cells.

Each (buffer, rank) that a non-input region touches gets a compressed grid whose row and column
edges are every edge of every region used there, so a region is always a whole rectangle of cells.
All the grids are laid end to end in one flat array of cells.

A schedule's tracked regions (those of non-input buffers) are listed as *rows*, reads and writes
apart: entry after entry, member after member, each member's regions in task order (the order of
the expanded schedule). So the rows of members ``first .. first + n - 1`` of one entry are one
slice, and so are their cells (each row's cells, row-major over its rectangle, one row after the
other). Members' regions come from the group's :class:`~mkernel.ir.Step` by index arithmetic on
numpy arrays (:mod:`mkernel.members`): no member is made as a Task or a Region, and a row's bounds
are worked out only where its record steps (the 2 x 8 GEMM+AR 32768^2 every-node build, 737k
members in 115k entries, 2.3M rows, takes about 0.4 s warm, 0.7-0.9 s in a fresh process, where
first-touch page faults of the new arrays cost as much again).
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter, is_

import numpy as np

from mkernel.ir import BufferKind, Op, Region, Schedule
from mkernel.members import RegionTable, member_slots, offsets, ragged, read_regions

class _Edges:
    """The row (or column) edges of every grid, in one sorted array of keys: grid g's edge x is
    ``offset[g] + x``, the grids laid end to end, each as wide as the widest or, where that leaves
    too many keys to mark, as its own largest edge. Where the possible keys are few (a GEMM's
    columns: 64 grids of 32k columns, against 4M edge values), they are marked rather than sorted,
    and :meth:`local` reads how many edges lie below a key from a table (a gather, where
    ``searchsorted`` over the edges cost 40 ns a key); where they are not too many (the rows of the
    2 x 8 GEMM+AR's grids: 22M keys for 1.4M edge values), marked and listed (11 ms, where sorting
    them took 58); else sorted."""

    def __init__(self, grids: list[np.ndarray], values: list[np.ndarray], count: int, size: int | None = None) -> None:
        """``size``: how many edge values there are, where ``values`` list some twice (a row that
        repeats its record's: see :meth:`_Rows.along`); the layout's choices count edge values."""
        span = 1 + max([0] + [int(v.max()) for v in values if v.size])
        size = sum(v.size for v in values) if size is None else size
        start = np.arange(count + 1, dtype=np.int64) * span  # each grid as wide as the widest
        if size and count * span > 4 * size and min(int(v.min()) for v in values if v.size) >= 0:
            top = np.zeros(count, np.int64)  # too wide to mark at once: each grid as wide as its own edges
            for g, v in zip(grids, values):
                np.maximum.at(top, g, v.astype(np.int64) + 1)  # (of one dtype: ufunc.at casting is 100x slower)
            np.cumsum(top, out=start[1:])
        self.offset = start[:-1]
        self._span = span if start[-1] == count * span else 0  # (every grid as wide: keys by a product, not a gather)
        keys = [self._key(g, v) for g, v in zip(grids, values)]  # (marked piece by piece: not joined)
        space = int(start[-1])
        self._below = None  # per key of the marked range: how many edges lie below it
        if size and space <= 32 * size and min(int(k.min()) for k in keys if k.size) >= 0:
            mark = np.zeros(space, bool)
            for k in keys:
                mark[k] = True
            self.u = np.flatnonzero(mark)
            if space <= 4 * size:
                self._below = np.zeros(space + 1, np.int32 if space < 2 ** 31 else np.int64)
                np.cumsum(mark, out=self._below[1:])
        else:
            self.u = np.unique(np.concatenate(keys))
        self.first = np.searchsorted(self.u, start)
        self.cells = np.maximum(np.diff(self.first) - 1, 0)  # per grid

    def local(self, g, x):
        """The index of edge ``x`` among grid ``g``'s edges (both may be arrays; ``x`` one of them)."""
        return self.index(g, x) - self.first[g]

    def index(self, g, x):
        """The index of grid ``g``'s edge ``x`` among every grid's edges: its :meth:`local` index
        plus ``first[g]`` (a row's cells are worked out from these: see :meth:`Cells._cells`)."""
        key = self._key(g, x)
        below = self._below
        if below is not None and np.size(key) and 0 <= np.min(key) and np.max(key) < len(below):
            return below[key]
        return np.searchsorted(self.u, key)

    def _key(self, g, x):
        return g * self._span + x if self._span else self.offset[g] + x


@dataclass
class Side:
    """The rows of one side, reads or writes (see the module)."""

    base: np.ndarray  # per entry, and one past the last: its first row
    n: np.ndarray  # per entry: tracked regions per member
    grid: np.ndarray  # per row: its grid
    start: np.ndarray  # per row, and one past the last: where its cells begin in ``cell``
    cell: np.ndarray  # every row's cells, in row order


class _Rows:
    """One side's rows (see the module) by record: each row's record and its member's
    :meth:`~mkernel.ir.Task.offset` (``off``). A row's fields are its record's plus its steps times
    that offset; they are listed only along an axis where they step (:meth:`along`)."""

    def __init__(self, recs: np.ndarray, per_entry: np.ndarray, counts: np.ndarray) -> None:
        self.recs, self.n = recs, per_entry
        self.base, self.rec, self.off = member_slots(per_entry, counts)
        wraps = recs[:, 9] > 0  # (rotate 0: never past the wrap) only the rows of wrapping records
        if wraps.any():
            at = np.flatnonzero(wraps[self.rec])
            self.off[at] = offsets(self.off[at], recs[self.rec[at], 9], recs[self.rec[at], 10])
        self.members = np.repeat(counts, per_entry)  # per record: its entry's members (its rows)
        self._step = recs[:, 6:9] != 0  # per record: whether its rank, rows, columns step
        ranked = self._step[:, 0]
        self.ranked = np.flatnonzero(ranked[self.rec]) if ranked.any() else np.zeros(0, np.int64)  # rows
        self.ranked_records = self.rec[self.ranked]  # and their records and ranks
        self.ranks = recs[self.ranked_records, 1] + recs[self.ranked_records, 6] * self.off[self.ranked]
        self._bounds: dict[int, tuple] = {}  # (along's)
        self.grid_of_record = self.grid = np.zeros(0, np.int64)  # (Cells._layout's)

    @property
    def moving(self) -> np.ndarray:
        """The rows whose record steps, by index (their offsets: :attr:`offset`)."""
        return np.flatnonzero(self._step.any(axis=1)[self.rec])

    @property
    def offset(self) -> np.ndarray:
        """Per :attr:`moving` row: its member's offset."""
        return self.off[self.moving]

    def along(self, axis: int, last: bool = False) -> tuple:
        """The rows that step in rank or along ``axis`` (1: rows, 2: columns): their indices, how
        many, their grids and two bounds there (made once: the edges and the rectangles read them;
        ``last``: the last reader, after which they are let go). Where they are most rows (a GEMM's
        columns), every row is listed, its indices as None: a row that does not step there has its
        record's bounds, already among the edges, and listing them all takes fewer passes than
        picking the others out (the 2 x 8 GEMM+AR's: 87% of them)."""
        if axis not in self._bounds:
            steps = self._step[:, 0] | self._step[:, axis]
            count = int(self.members[steps].sum())
            if 2 * count > len(self.rec):
                at, r, off, g = None, self.rec, self.off, self.grid
            else:
                at = np.flatnonzero(steps[self.rec])
                r, off, g = self.rec[at], self.off[at], self.grid[at]
            moved = self.recs[r, 6 + axis] * off  # (both bounds move alike)
            self._bounds[axis] = (at, count, g, self.recs[r, 2 * axis] + moved, self.recs[r, 2 * axis + 1] + moved)
        return self._bounds.pop(axis) if last else self._bounds[axis]


class Cells:
    """Grids, expected arrivals and each row's cells of one schedule (see the module).

    ``need`` (one per read cell): the arrivals a member's read of that cell waits for, the writes
    the schedule makes there less the member's own (an in-place update does not wait on itself).
    ``regions``: :func:`mkernel.members.read_regions` of ``s``, where it was read already (by
    ``validate()``: the 2 x 8 GEMM+AR 32768^2 every-node build's 623k regions take 0.3-0.45 s to read)."""

    def __init__(self, s: Schedule, regions: RegionTable | None = None) -> None:
        recs, f, code = regions or read_regions(s)
        entries = len(s.tasks)
        inputs = [code[b.name] for b in s.buffers if b.kind is BufferKind.INPUT]
        tracked = ~np.isin(recs[:, 0], inputs)
        sides = (tracked & f["read"], tracked & ~f["read"])
        per = [np.bincount(f["entry"][side], minlength=entries) for side in sides]
        self.read_pos = f["k"][sides[0]]  # per tracked read: its index in Task.reads
        self.read_first = np.zeros(entries + 1, np.int64)  # per entry: its first tracked read in read_pos
        np.cumsum(per[0], out=self.read_first[1:])
        puts = np.fromiter(map(is_, map(attrgetter("op"), s.tasks), repeat(Op.PUT)), bool, entries)
        kept = [recs[side] for side in sides]  # (each side's records copied once)
        pairs = _pairs([(r, f["entry"][side]) for r, side in zip(kept, sides)], per, puts, len(code))
        counts = np.fromiter(map(attrgetter("count"), s.tasks), np.int64, entries)
        self.uid0 = np.zeros(len(counts) + 1, np.int64)  # each entry's member 0 in the expanded schedule
        np.cumsum(counts, out=self.uid0[1:])
        sides = [_Rows(r, n, counts) for r, n in zip(kept, per)]
        del kept
        self._layout(s, sides, {c: name for name, c in code.items()})
        done, rects = [], []
        while sides:  # side by side, each one's rows let go once its cells are made (a third less memory at the peak)
            rows = sides.pop(0)
            rects.append(self._rect(rows))
            done.append(Side(rows.base, rows.n, rows.grid, *self._cells(rows.grid, rects[-1])))
            del rows
        self.read, self.write = done
        self.expected = np.bincount(self.write.cell, minlength=self.total).astype(np.int32)
        self.write_once = self._once(len(counts))
        self.need = self.expected[self.read.cell] - self._own(pairs, counts, rects)

    def _layout(self, s: Schedule, sides: list[_Rows], names: dict[int, str]) -> None:
        """The grids: one per (buffer, rank) of some row, their edges, and where their cells begin.
        A row whose rank does not step is in its record's grid."""
        world = 1 + max([s.world - 1] + [int(x.max()) for rows in sides
                                         for x in (rows.recs[:, 1], rows.ranks) if x.size])
        keys = [(rows.recs[:, 0] * world + rows.recs[:, 1], rows.recs[rows.ranked_records, 0] * world
                 + rows.ranks) for rows in sides]
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
            rows.grid = rows.grid_of_record[rows.rec]
            rows.grid[rows.ranked] = number[moved]
        self.rows, self.cols = (self._edges(sides, axis, len(uniq)) for axis in (1, 2))
        self.grid_base = np.zeros(len(uniq) + 1, np.int64)
        np.cumsum(self.rows.cells * self.cols.cells, out=self.grid_base[1:])
        self.total = int(self.grid_base[-1])

    def _edges(self, sides: list[_Rows], axis: int, count: int) -> _Edges:
        """The edges along ``axis`` (1: rows, 2: columns) of the ``count`` grids: every record's
        (member 0's), and those of the rows that step in rank or along the axis (the others have
        their record's edges there: four fifths of the 2 x 8 GEMM+AR's row edges)."""
        grids, values, size = [], [], 0
        for rows in sides:
            _, stepping, g, v0, v1 = rows.along(axis)
            grids += [rows.grid_of_record, rows.grid_of_record, g, g]
            values += [rows.recs[:, 2 * axis], rows.recs[:, 2 * axis + 1], v0, v1]
            size += 2 * (len(rows.recs) + stepping)
        return _Edges(grids, values, count, size)

    def _rect(self, rows: _Rows) -> tuple[np.ndarray, ...]:
        """Each row's cells: first and end cell row, first and end cell column, as edge indices
        among every grid's (:meth:`_Edges.index`: its grid's own less the grid's ``first``; a row
        that steps neither in rank nor along an axis: its record's there)."""
        out = []
        for axis, edges in ((1, self.rows), (2, self.cols)):
            at, _, g, *bounds = rows.along(axis, last=True)
            for b in (0, 1):
                if at is None:  # every row listed
                    x = edges.index(g, bounds[b])
                else:
                    x = edges.index(rows.grid_of_record, rows.recs[:, 2 * axis + b])[rows.rec]
                    x[at] = edges.index(g, bounds[b])
                bounds[b] = None  # (let go as soon as read)
                out.append(x)
        return tuple(out)

    def _cells(self, g: np.ndarray, rect: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
        """(start, cell) of a side (see :class:`Side`). Each row's first cell is repeated over its
        cells, and only the rows of more than one cell (1.4% of the 2 x 8 GEMM+AR's) get the rest worked out."""
        a0, a1, b0, b1 = rect  # (edge indices among every grid's: see _rect)
        size = np.maximum(a1 - a0, 0) * np.maximum(b1 - b0, 0)  # (0 where either is empty)
        start = np.zeros(len(size) + 1, np.int64)
        np.cumsum(size, out=start[1:])
        width = self.cols.cells[g]
        corner = self.grid_base[:-1] - self.rows.first[:-1] * self.cols.cells - self.cols.first[:-1]  # per grid
        cell = np.repeat(corner[g] + a0 * width + b0, size)
        more = np.flatnonzero(size > 1)
        if len(more):  # cell t of a row: t // w rows and t % w columns on (w: the row's width in cells)
            row, t = ragged(size[more])
            w = (b1 - b0)[more][row]
            u = t // w
            cell[start[more][row] + t] += u * width[more][row] + (t - u * w)
        return start, cell.astype(np.int32 if self.total < 2 ** 31 else np.int64)

    def _once(self, entries: int) -> list[bool]:
        """Per entry: whether its members' writes cover no cell twice (so a run's land as one add).
        Only cells that the schedule writes more than once (``expected``) can be met twice in one
        entry; their (entry, cell) pairs, sorted as one number, show the repeats."""
        w, total = self.write, max(self.total, 1)
        entry = np.repeat(np.arange(entries, dtype=np.int64), np.diff(w.start[w.base]))  # per cell
        again = self.expected[w.cell] > 1
        key = np.sort(entry[again] * total + w.cell[again])
        once = np.ones(entries, bool)
        once[key[1:][np.diff(key) == 0] // total] = False
        return once.tolist()

    def _own(self, pairs: np.ndarray, counts: np.ndarray, rects: list) -> np.ndarray:
        """Per read cell: how many of its member's own writes cover it (see ``need``)."""
        own = np.zeros(len(self.read.cell), np.int32)
        if not len(pairs):
            return own
        pair = pairs
        which, i = ragged(counts[pair[:, 0]])
        p, qr, qw = (pair[which, f] for f in (0, 1, 2))
        r = self.read.base[p] + i * self.read.n[p] + qr
        w = self.write.base[p] + i * self.write.n[p] + qw
        (ra0, ra1, rb0, rb1), (wa0, wa1, wb0, wb1) = ([x[y] for x in rect] for rect, y in zip(rects, (r, w)))
        lo_a, hi_a, lo_b, hi_b = np.maximum(ra0, wa0), np.minimum(ra1, wa1), np.maximum(rb0, wb0), np.minimum(rb1, wb1)
        keep = (self.read.grid[r] == self.write.grid[w]) & (lo_a < hi_a) & (lo_b < hi_b)
        r, ra0, rb0, rb1, lo_a, hi_a, lo_b, hi_b = (x[keep] for x in (r, ra0, rb0, rb1, lo_a, hi_a, lo_b, hi_b))
        j, t = ragged(self.read.start[r + 1] - self.read.start[r])
        width = (rb1 - rb0)[j]
        u = t // np.maximum(width, 1)
        a, b = ra0[j] + u, rb0[j] + (t - u * width)
        inside = (a >= lo_a[j]) & (a < hi_a[j]) & (b >= lo_b[j]) & (b < hi_b[j])
        np.add.at(own, (self.read.start[r][j] + t)[inside], 1)
        return own

    def read_of(self, p: int, q: int) -> int:
        """The index in ``Task.reads`` of entry ``p``'s ``q``-th tracked read."""
        return int(self.read_pos[self.read_first[p] + q])

    def rect(self, r: Region) -> tuple[int, int, int, int]:
        """Region ``r``'s cell rectangle in its grid (as :meth:`_rect`)."""
        g = self.grid[(r.buffer, r.rank)]
        return (int(self.rows.local(g, r.row0)), int(self.rows.local(g, r.row1)),
                int(self.cols.local(g, r.col0)), int(self.cols.local(g, r.col1)))

    def write_uids(self, rows: np.ndarray) -> np.ndarray:
        """The member (by expanded id) each write row is of."""
        base, n = self.write.base, self.write.n
        p = np.searchsorted(base[:-1], rows, "right") - 1
        return self.uid0[p] + (rows - base[p]) // np.maximum(n[p], 1)

    def write_rects(self, rows: np.ndarray) -> tuple[np.ndarray, ...]:
        """Each write row's cell rectangle (as :meth:`_rect`; empty rows as 0, 0, 0, 0), from its
        first and last cells."""
        s0, s1 = self.write.start[rows], self.write.start[rows + 1]
        full = s1 > s0
        if not self.write.cell.size:
            return (np.zeros(len(rows), np.int64),) * 4
        g = self.write.grid[rows]
        width = np.maximum(self.cols.cells[g], 1)
        first = self.write.cell[np.where(full, s0, 0)] - self.grid_base[g]
        last = self.write.cell[np.where(full, s1 - 1, 0)] - self.grid_base[g]
        a0, b0 = first // width, first % width
        a1, b1 = last // width + 1, last % width + 1
        return tuple(np.where(full, x, 0) for x in (a0, a1, b0, b1))


def _pairs(sides: list[tuple[np.ndarray, np.ndarray]], per: list[np.ndarray], puts: np.ndarray,
           buffers: int) -> np.ndarray:
    """(entry, tracked read, tracked write) of each entry that is not a put, for a read and a write
    of one buffer that may meet (on one rank, or moving apart: a read on another rank, moving
    alike, never meets it), each numbered among its entry's tracked reads or writes."""
    (rrec, rentry), (wrec, wentry) = sides
    local = [np.arange(len(e), dtype=np.int64) - (np.cumsum(n) - n)[e] for (_, e), n in zip(sides, per)]
    rkey = rentry * buffers + rrec[:, 0]
    order = np.argsort(rkey, kind="stable")
    keep = ~puts[wentry]
    wkey = (wentry * buffers + wrec[:, 0])[keep]
    lo, hi = np.searchsorted(rkey[order], wkey, "left"), np.searchsorted(rkey[order], wkey, "right")
    which, j = ragged(hi - lo)
    r, w = order[lo[which] + j], np.flatnonzero(keep)[which]
    meet = (rrec[r, 1] == wrec[w, 1]) | (rrec[r, 6] != wrec[w, 6])
    return np.stack((rentry[r], local[0][r], local[1][w]), axis=1)[meet]
