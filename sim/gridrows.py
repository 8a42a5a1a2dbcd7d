"""A side's rows of the hazard grids (:mod:`mkernel.sim.cellgrid`) by record, not listed (:class:`Rows`);
which reads repeat the one before them (:func:`repeats`), and which reads and writes of one member may
meet (:func:`pairs`: an in-place update does not wait on its own write). Each works on the region
table's records (:mod:`mkernel.members`) and the entries' member counts, as few passes over the rows
as it can: the 2 x 8 GEMM+AR 32768^2 every-node build has 2.3M rows of 438k records."""
from __future__ import annotations

import numpy as np

from mkernel.members import member_slots, offsets, ragged

from .gridedges import Span, Stepped


class Rows:
    """One side's rows (see the module) by record: each row's record and its member's
    :meth:`~mkernel.ir.Task.offset` (``off``). A row's fields are its record's plus its steps times
    that offset; they are listed only along an axis where they step (:meth:`along`)."""

    def __init__(self, recs: np.ndarray, per_entry: np.ndarray, counts: np.ndarray) -> None:
        self.recs, self.n = recs, per_entry
        self.base, self.rec, self.off = member_slots(per_entry, counts)
        self.members = np.repeat(counts, per_entry)  # per record: its entry's members (its rows)
        self.least, self.most = np.zeros(len(recs), np.int64), self.members - 1  # per record: its rows' offsets
        wraps = np.flatnonzero(recs[:, 9] > 0)
        if len(wraps):  # (rotate 0: never past the wrap) only the rows of wrapping records, record by record
            at, which, i = self._rows_of(wraps)
            size = self.members[wraps]
            self.off[at] = off = offsets(i, recs[wraps, 9][which], recs[wraps, 10][which])
            self.least[wraps], self.most[wraps] = np.iinfo(np.int64).max, np.iinfo(np.int64).min
            live = size > 0  # (each one's offsets are a run of ``off``: reduced run by run, not by ufunc.at)
            if live.any():
                starts = (np.cumsum(size) - size)[live]
                self.least[wraps[live]] = np.minimum.reduceat(off, starts)
                self.most[wraps[live]] = np.maximum.reduceat(off, starts)
        # per record: whether its rank, rows, columns step (field by field: a (records, 3) block's rows of three
        # are compared by an inner loop of three each, about six times the instructions of a strided column)
        self._step = [recs[:, f] != 0 for f in (6, 7, 8)]
        ranked = self._step[0]
        self.ranked = np.flatnonzero(ranked[self.rec]) if ranked.any() else np.zeros(0, np.int64)  # rows
        self.ranked_records = self.rec[self.ranked]  # and their records and ranks
        self.ranks = recs[self.ranked_records, 1] + recs[self.ranked_records, 6] * self.off[self.ranked]
        self.grid_of_record = np.zeros(0, np.int64)  # (Cells._layout's)
        self.grid: np.ndarray | None = None  # per row, listed only where some row steps in rank (grid_at)
        self.span: dict[int, Span] = {}  # per axis (Cells._edges')

    def _rows_of(self, records: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows of ``records`` (member i of its entry's record j: row ``base + i n + j`` of the entry),
        record by record, without a pass over every row; and each one's place in ``records`` and member."""
        ends = np.cumsum(self.n)
        e = np.searchsorted(ends, records, "right")  # each one's entry, and its place among the entry's records
        which, i = ragged(self.members[records])
        return np.take(self.base[e] + records - ends[e] + self.n[e], which) + i * np.take(self.n[e], which), which, i

    def grid_at(self, at: np.ndarray | slice = slice(None)) -> np.ndarray:
        """The grids of rows ``at`` (all by default)."""
        return self.grid_of_record[self.rec[at]] if self.grid is None else self.grid[at]

    @property
    def moving(self) -> np.ndarray:
        """The rows whose record steps, by index (tests read these; the grids key them: :meth:`along`)."""
        return np.flatnonzero((self._step[0] | self._step[1] | self._step[2])[self.rec])

    @property
    def offset(self) -> np.ndarray:
        """Per :attr:`moving` row: its member's offset (tests/core/test_rotate_period.py reads these)."""
        return self.off[self.moving]

    def along(self, axis: int) -> tuple[int, tuple | Stepped]:
        """How many rows step in rank or along ``axis`` (1: rows, 2: columns), and those rows:
        their indices, grids and two bounds there. Where they are most rows (a GEMM's columns) and
        none steps in rank, every row instead, as a :class:`Stepped` (not listed): a row that does
        not step there has its record's bounds, already among the edges, and keying them all takes
        fewer passes than picking the others out (the 2 x 8 GEMM+AR's: 87% of them)."""
        steps = self._step[0] | self._step[axis]
        count = int(self.members[steps].sum())
        field = self.recs.T  # (a field's column gathered by rows: 2.5x a gather of (row, field) pairs)
        if 2 * count > len(self.rec) and not len(self.ranked):
            step = field[6 + axis]
            a, b = step * self.least, step * self.most
            return count, Stepped(self.grid_of_record, field[2 * axis], field[2 * axis + 1], step,
                                   self.rec, self.off, np.minimum(a, b), np.maximum(a, b))
        stepping = np.flatnonzero(steps)
        at, which, _ = self._rows_of(stepping)  # (record by record, not in row order: any order serves)
        r, off = np.take(stepping, which), np.take(self.off, at)  # (np.take: see gridedges.Slots.index)
        moved = field[6 + axis][r] * off  # (both bounds move alike)
        grid = np.take(self.grid_of_record, r) if self.grid is None else np.take(self.grid, at)
        return count, (at, grid, field[2 * axis][r] + moved, field[2 * axis + 1][r] + moved)


def repeats(recs: np.ndarray, entry: np.ndarray) -> np.ndarray | None:
    """Per record: whether it repeats the record before it, of the same entry (None where none does).
    (Field by field: a third fewer instructions than comparing whole records, reduced along them; 32-bit
    fields two at a time, as the 64-bit numbers their bytes make: equal exactly where both are, a sixth
    fewer instructions again on the 2 x 8 GEMM+AR's 279k reads.)"""
    same = np.zeros(len(recs), bool)
    if len(recs) > 1:
        same[1:] = entry[1:] == entry[:-1]
        for field in _fields(recs):
            same[1:] &= field[1:] == field[:-1]
    return same if same.any() else None


def _fields(recs: np.ndarray) -> list[np.ndarray]:
    """The columns of ``recs``, those of a C-ordered 32-bit table by twos (each pair viewed as one 64-bit
    column: the bytes of both) and its last alone where they are odd; as they are where not 32-bit."""
    width = recs.shape[1]
    if recs.dtype.itemsize != 4 or recs.dtype.kind not in "iu" or not recs.flags.c_contiguous or width < 2:
        return list(recs.T)
    even = width - width % 2
    return list(recs[:, :even].view(np.int64).T) + ([recs[:, even]] if width % 2 else [])


def pairs(sides: list[tuple[np.ndarray, np.ndarray]], per: list[np.ndarray], puts: np.ndarray,
           buffers: int) -> np.ndarray:
    """(entry, tracked read, tracked write) of each entry that is not a put, for a read and a write
    of one buffer that may meet (on one rank, or moving apart: a read on another rank, moving
    alike, never meets it), each numbered among its entry's tracked reads or writes.

    Only the records of an (entry, buffer) that a non-put entry both reads and writes are joined,
    and where no record steps in rank (no builder's does), by (entry, buffer, rank): then two meet
    exactly where their keys are equal. (The 2 x 8 GEMM+AR's 115k reductions into OUT read it on
    their own rank and write it on the 7 others: 800k pairs of (entry, buffer), none that meet.)"""
    (rrec, rentry), (wrec, wentry) = sides
    rkey, wkey = rentry * buffers + rrec[:, 0], wentry * buffers + wrec[:, 0]
    read, written = np.zeros(len(puts) * buffers, bool), np.zeros(len(puts) * buffers, bool)
    read[rkey] = True
    written[wkey[~puts[wentry]]] = True
    both = read & written
    ro, wo = np.flatnonzero(both[rkey]), np.flatnonzero(both[wkey] & ~puts[wentry])  # (by index)
    rkey, wkey = rkey[ro], wkey[wo]
    rrank, wrank = rrec[:, 1][ro], wrec[:, 1][wo]  # (a column gathered: 2.5x a gather of (row, field) pairs)
    stepping = rrec[:, 6][ro].any() or wrec[:, 6][wo].any()
    if len(ro) and len(wo) and min(rrank.min(), wrank.min()) >= 0 and not stepping:
        world = int(max(rrank.max(), wrank.max())) + 1
        rkey, wkey = rkey * world + rrank, wkey * world + wrank
        space = len(puts) * buffers * world
        if space <= 64 * (len(rkey) + len(wkey)):  # only the writes whose key some read has are searched for, told
            read = np.zeros(space, bool)  # by marks (two searches: ~320 instructions a write; a mark and a look, ~30)
            read[rkey] = True
            found = np.flatnonzero(read[wkey])
            wo, wkey = wo[found], wkey[found]
    local = [at - (np.cumsum(n) - n)[e[at]] for at, (_, e), n in zip((ro, wo), sides, per)]
    order = np.argsort(rkey, kind="stable")
    keys = rkey[order]
    lo, hi = np.searchsorted(keys, wkey, "left"), np.searchsorted(keys, wkey, "right")
    which, j = ragged(hi - lo)
    r, w = order[lo[which] + j], which
    meet = (rrec[ro[r], 1] == wrec[wo[w], 1]) | (rrec[ro[r], 6] != wrec[wo[w], 6])
    return np.stack((rentry[ro[r]], local[0][r], local[1][w]), axis=1)[meet]
