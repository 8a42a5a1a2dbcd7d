"""The output-coverage rule of ``validate()``: each OUTPUT element on each rank is written exactly
``writes_per_element`` times (plain writes plus accumulations).

Counted on a grouped schedule without making its members: every member's write region is a row
of a few integer arrays (:mod:`mkernel.members`). Why: a 2 x 8 GEMM+AR of 32768^2 writes its
outputs through about a million members, and making them one Task at a time cost most of validate.

Per (buffer, rank), coordinates are compressed to the distinct region edges (the count grid is
about the tile grid) and the regions are summed into a 2-D difference array, whose running sums
along both axes are each cell's count. The first bad cell in row-major order is the one reported,
with the (expanded) ids of the tasks that write it: the message the check on the expanded
schedule gives, where member i of the group of id j, ``count`` c, is task ``first + i``, ``first``
being the number of members before the group.
"""
from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter

import numpy as np

from .errors import ScheduleError
from .ir import Buffer, BufferKind, Schedule
from .members import offsets, ragged, read_regions


def check_outputs(s: Schedule, buffers: dict[str, Buffer], table: tuple | None = None,
                  counts: np.ndarray | None = None) -> None:
    """Raise :class:`ScheduleError` on the first OUTPUT element (by buffer, rank, then row-major)
    not written ``writes_per_element`` times, naming the element, its count and its writers;
    ``table``: :func:`mkernel.members.read_regions` of ``s``, and ``counts`` its entries' member
    counts, where they were made already."""
    outputs = [b for b in s.buffers if b.kind is BufferKind.OUTPUT]
    if not outputs:
        return
    if counts is None:
        counts = np.fromiter(map(attrgetter("count"), s.tasks), np.int64, len(s.tasks))
    writes = _MemberWrites({b.name: i for i, b in enumerate(outputs)}, table or read_regions(s), counts, s.world)
    for b, buf in enumerate(outputs):
        for r in range(s.world):
            at = writes.group(b * s.world + r)
            _check_coverage(buf, r, *(x[at] for x in writes.bounds), lambda hit, at=at: writes.writers(at, hit))


class _MemberWrites:
    """Every member's write into an output, one row each, rows grouped by (output, rank) (within a
    group their order is free: the rule counts them, and an error sorts the writers it names): its
    ``bounds`` (rows and columns), as arrays; the rows of each group (:meth:`group`); the expanded
    task ids and write positions only of the rows an error names (:meth:`writers`). A record's
    numbers per member are np.repeat of its own, moved by its steps times the member's offset.

    Where no record's rank steps (a builder's never does), a record's members share its group, so
    the records are put in group order and their members follow in it: no sort of the members, and
    each group's rows are a range (a 2 x 8 GEMM+AR 32768^2 build: 131k records, 524k members)."""

    def __init__(self, outputs: dict[str, int], table: tuple, counts: np.ndarray, world: int) -> None:
        recs, f, code = table
        which = np.full(len(code), -1, np.int64)  # per buffer code: its output index
        for name, b in outputs.items():
            which[code[name]] = b
        kept = np.flatnonzero(~f["read"] & (which[recs[:, 0]] >= 0))
        groups = len(outputs) * world
        key = which[np.take(recs[:, 0], kept)] * world + np.take(recs[:, 1], kept)  # (each record's group)
        ranks_step = bool(np.take(recs[:, 6], kept).any())
        if not ranks_step:  # each group's records together (a stable sort: in their order within it)
            order = np.argsort(_narrow(key, groups), kind="stable")
            kept, key = kept[order], key[order]
        entry = f["entry"][kept]
        cols = np.take(recs, kept, axis=0).T.astype(np.int64, order="C")  # (the kept records' fields, a row each)
        size = counts[entry]  # (members per kept record)
        rec, i = ragged(size)
        o = offsets(i, np.repeat(cols[9], size), np.repeat(cols[10], size)) if cols[9].any() else i

        def moved(field: int, step: int) -> np.ndarray:  # (a step of 0 everywhere moves nothing: skipped)
            at = np.repeat(cols[field], size)
            return at + np.repeat(cols[step], size) * o if cols[step].any() else at

        self._order = start = None
        if ranks_step:  # each member's group its own: the members sorted by it
            key = np.repeat(which[cols[0]], size) * world + moved(1, 6)
            self._order = np.argsort(_narrow(key, groups), kind="stable")
            key = key[self._order]
        else:  # a group's members are those of its records: the rows from its first record's on
            start = np.zeros(len(size) + 1, np.int64)
            np.cumsum(size, out=start[1:])
        bounds = np.searchsorted(key, np.arange(groups + 1))  # (a key that is no group's is in none)
        self._bounds = (bounds if start is None else start[bounds]).tolist()
        self.bounds = [moved(field, step) for field, step in ((2, 7), (3, 7), (4, 8), (5, 8))]
        nread = np.bincount(f["entry"][f["read"]], minlength=len(counts))  # (the table's reads, per entry)
        self._rec, self._i, self._entry, self._pos = rec, i, entry, f["k"][kept] - nread[entry]
        self._first = np.concatenate(([0], np.cumsum(counts)[:-1]))  # each entry's member 0 in the expanded schedule

    def group(self, g: int) -> np.ndarray | slice:
        """The rows of group ``g`` (output index times the world, plus the rank)."""
        lo, hi = self._bounds[g], self._bounds[g + 1]
        return slice(lo, hi) if self._order is None else self._order[lo:hi]

    def writers(self, group: np.ndarray | slice, hit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Of the rows ``hit`` marks among those of a :meth:`group`: the expanded id of the member that
        writes each (member i of the entry whose member 0 is task ``first`` is task ``first + i``) and
        its position among that task's writes."""
        rows = np.flatnonzero(hit) + group.start if isinstance(group, slice) else group[hit]
        rec = self._rec[rows]
        return self._first[self._entry[rec]] + self._i[rows], self._pos[rec]


def _narrow(key: np.ndarray, groups: int) -> np.ndarray:
    """``key`` as 16-bit numbers where every key is a group's and they fit (a stable sort of them is a
    radix sort, a few times quicker than one of 64-bit keys, and its permutation the same)."""
    fits = bool(len(key)) and 0 <= int(key.min()) and int(key.max()) < min(groups, 2 ** 16)
    return key.astype(np.uint16) if fits else key


def _edges(lo: np.ndarray, hi: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct values of ``lo``, ``hi``, 0 and ``size``, sorted, and the index among them of each
    value of ``lo`` and of ``hi``: what np.unique and np.searchsorted answer. Where every value lies in
    0..size and ``size`` is at most a few times their number (a buffer's tile edges, which validate's
    bounds rule has checked), a mark per value and a running count of the marks (a value's index is
    the number of marked values up to it, less one) answer it without a sort."""
    if (size < 8 * len(lo) + 4096 and min(lo.min(initial=0), hi.min(initial=0)) >= 0
            and max(lo.max(initial=0), hi.max(initial=0)) <= size):
        seen = np.zeros(size + 1, bool)
        seen[[0, size]] = seen[lo] = seen[hi] = True
        index = np.cumsum(seen) - 1
        return np.flatnonzero(seen), index[lo], index[hi]
    edges = np.unique(np.concatenate(([0, size], lo, hi)))
    return edges, np.searchsorted(edges, lo), np.searchsorted(edges, hi)


def _check_coverage(buf: Buffer, rank: int, row0: np.ndarray, row1: np.ndarray, col0: np.ndarray,
                    col1: np.ndarray, writers: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]) -> None:
    """The rule on ``buf`` of ``rank``, written by regions ``row0..row1 x col0..col1`` (one per member
    write); ``writers`` of a mask of them: their expanded task ids and write positions (for the error)."""
    rows, r0, r1 = _edges(row0, row1, buf.rows)
    cols, c0, c1 = _edges(col0, col1, buf.cols)
    width, cells = len(cols), len(rows) * len(cols)
    # each region adds 1 at (r0, c0) and (r1, c1) and takes 1 at (r0, c1) and (r1, c0) (a count per
    # corner: the four sums are of the cells, the rows' lists are not joined)
    top, bottom = r0 * width, r1 * width
    diff = (np.bincount(top + c0, minlength=cells) + np.bincount(bottom + c1, minlength=cells)
            - np.bincount(top + c1, minlength=cells) - np.bincount(bottom + c0, minlength=cells))
    count = diff.reshape(len(rows), width).cumsum(axis=0).cumsum(axis=1)[:-1, :-1]
    bad = np.argwhere(count != buf.writes_per_element)
    if len(bad) == 0:
        return
    i, j = bad[0]
    row, col = int(rows[i]), int(cols[j])
    ids, pos = writers((row0 <= row) & (row < row1) & (col0 <= col) & (col < col1))
    by = [int(t) for t in ids[np.lexsort((pos, ids))]]  # in task order, then write order
    raise ScheduleError(
        f"output {buf.name} on rank {rank}: element ({row}, {col}) is written {count[i, j]} times, "
        f"expected {buf.writes_per_element}" + (f" (by tasks {by})" if by else " (by no task)"))
