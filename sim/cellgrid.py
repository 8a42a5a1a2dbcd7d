"""The hazard tracker's grids (:mod:`mkernel.sim.hazards`): every member's regions as grid cells.

Each (buffer, rank) that a non-input region touches gets a compressed grid whose row and column
edges are every edge of every region used there, so a region is always a whole rectangle of cells.
All the grids are laid end to end in one flat array of cells.

A schedule's tracked regions (those of non-input buffers) are listed as *rows*, reads and writes
apart: entry after entry, member after member, each member's regions in task order (the order of
the expanded schedule). So the rows of members ``first .. first + n - 1`` of one entry are one
slice, and so are their cells (each row's cells, row-major over its rectangle, one row after the
other). Members' regions come from the group's :class:`~mkernel.ir.Step` by index arithmetic on
numpy arrays (:mod:`mkernel.members`): no member is made as a Task or a Region (the 2 x 8 GEMM+AR
32768^2 every-node build, 737k members in 188k entries, is listed in about 2 s, most of it reading
the entries' regions).
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter, is_

import numpy as np

from mkernel.ir import BufferKind, Op, Region, Schedule
from mkernel.members import RegionTable, member_rows, ragged, read_regions

class _Edges:
    """The row (or column) edges of every grid, in one sorted array: grid g's are ``g * span + x``."""

    def __init__(self, grids: list[np.ndarray], values: list[np.ndarray], count: int) -> None:
        self.span = 1 + max([0] + [int(v.max()) for v in values if v.size])
        keys = np.concatenate([g * self.span + v for g, v in zip(grids, values)])
        if keys.size and count * self.span <= 4 * keys.size and keys.min() >= 0:
            # few possible edges (a GEMM's columns, 4k of 4M): marked, not sorted
            mark = np.zeros(count * self.span, bool)
            mark[keys] = True
            self.u = np.flatnonzero(mark)
        else:
            self.u = np.unique(keys)
        self.first = np.searchsorted(self.u, np.arange(count + 1) * self.span)
        self.cells = np.maximum(np.diff(self.first) - 1, 0)  # per grid

    def local(self, g, x):
        """The index of edge ``x`` among grid ``g``'s edges (both may be arrays)."""
        return np.searchsorted(self.u, g * self.span + x) - self.first[g]


@dataclass
class Side:
    """The rows of one side, reads or writes (see the module)."""

    base: np.ndarray  # per entry, and one past the last: its first row
    n: np.ndarray  # per entry: tracked regions per member
    grid: np.ndarray  # per row: its grid
    start: np.ndarray  # per row, and one past the last: where its cells begin in ``cell``
    cell: np.ndarray  # every row's cells, in row order


class Cells:
    """Grids, expected arrivals and each row's cells of one schedule (see the module).

    ``need`` (one per read cell): the arrivals a member's read of that cell waits for, the writes
    the schedule makes there less the member's own (an in-place update does not wait on itself).
    ``regions``: :func:`mkernel.members.read_regions` of ``s``, where it was read already (by
    ``validate()``: the 2 x 8 GEMM+AR 32768^2 every-node build's 490k regions take 0.35 s to read)."""

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
        pairs = _pairs([(recs[side], f["entry"][side]) for side in sides], per, puts, len(code))
        counts = np.fromiter(map(attrgetter("count"), s.tasks), np.int64, entries)
        self.uid0 = np.zeros(len(counts) + 1, np.int64)  # each entry's member 0 in the expanded schedule
        np.cumsum(counts, out=self.uid0[1:])
        steps = [recs[side][:, 6:9] for side in sides]
        sides = [member_rows(recs[side], n, counts) for side, n in zip(sides, per)]
        self._layout(s, sides, steps, {c: name for name, c in code.items()})
        rects = [self._rect(f, g) for (_, _, f), g in zip(sides, self._grid_of)]
        self.read, self.write = (Side(base, n, g, *self._cells(g, rect))
                                 for (base, n, _), g, rect in zip(sides, self._grid_of, rects))
        del self._grid_of
        self.expected = np.bincount(self.write.cell, minlength=self.total).astype(np.int32)
        self.write_once = self._once(len(counts))
        self.need = self.expected[self.read.cell] - self._own(pairs, counts, rects)

    def _layout(self, s: Schedule, sides: list, steps: list[np.ndarray], names: dict[int, str]) -> None:
        """The grids: one per (buffer, rank) of some row, their edges, and where their cells begin."""
        world = 1 + max([s.world - 1] + [int(f["rank"].max()) for _, _, f in sides if f["rank"].size])
        keys = [f["buffer"] * world + f["rank"] for _, _, f in sides]
        used = np.zeros(len(names) * world, np.int64)  # (a few hundred keys: counted, not sorted)
        for k in keys:
            used += np.bincount(k, minlength=len(used))
        uniq = np.flatnonzero(used)
        self.grid = {(names[k // world], k % world): g for g, k in enumerate(uniq.tolist())}
        self.grid_rank = uniq % world
        number = np.zeros(len(used), np.int64)
        number[uniq] = np.arange(len(uniq))
        self._grid_of = [number[k] for k in keys]
        self.rows, self.cols = (self._edges(sides, steps, axis, len(uniq)) for axis in (1, 2))
        self.grid_base = np.zeros(len(uniq) + 1, np.int64)
        np.cumsum(self.rows.cells * self.cols.cells, out=self.grid_base[1:])
        self.total = int(self.grid_base[-1])

    def _edges(self, sides: list, steps: list[np.ndarray], axis: int, count: int) -> _Edges:
        """The edges along ``axis`` (1: rows, 2: columns) of the ``count`` grids. A group's members
        whose regions move neither in rank nor along the axis have member 0's edges there, so only
        member 0's rows and the moving ones' are read (a fifth of the 2 x 8 GEMM+AR's row edges)."""
        bounds = ("row0", "row1") if axis == 1 else ("col0", "col1")
        grids, values = [], []
        for (_, _, f), step, g in zip(sides, steps, self._grid_of):
            read = (f["member"] == 0) | (step[f["record"], 0] != 0) | (step[f["record"], axis] != 0)
            grids += [g[read]] * 2
            values += [f[b][read] for b in bounds]
        return _Edges(grids, values, count)

    def _rect(self, f: dict, g: np.ndarray) -> tuple[np.ndarray, ...]:
        """Each row's cells: first and end cell row, first and end cell column, in its grid."""
        return (self.rows.local(g, f["row0"]), self.rows.local(g, f["row1"]),
                self.cols.local(g, f["col0"]), self.cols.local(g, f["col1"]))

    def _cells(self, g: np.ndarray, rect: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
        """(start, cell) of a side (see :class:`Side`)."""
        a0, a1, b0, b1 = rect
        size = np.where((a1 > a0) & (b1 > b0), (a1 - a0) * (b1 - b0), 0)
        start = np.zeros(len(size) + 1, np.int64)
        np.cumsum(size, out=start[1:])
        row, t = ragged(size)
        width = (b1 - b0)[row]
        u = t // np.maximum(width, 1)
        gr = g[row]
        cell = self.grid_base[gr] + (a0[row] + u) * self.cols.cells[gr] + b0[row] + (t - u * width)
        return start, cell.astype(np.int32 if self.total < 2 ** 31 else np.int64)

    def _once(self, entries: int) -> list[bool]:
        """Per entry: whether its members' writes cover no cell twice (so a run's land as one add)."""
        rows, _ = ragged(np.diff(self.write.start))
        entry = np.searchsorted(self.write.base[:-1], rows, "right") - 1
        order = np.lexsort((self.write.cell, entry))
        same = (np.diff(entry[order]) == 0) & (np.diff(self.write.cell[order]) == 0)
        once = np.ones(entries, bool)
        once[entry[order][1:][same]] = False
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
