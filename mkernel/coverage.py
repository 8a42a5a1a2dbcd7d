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
    writes = _MemberWrites({b.name: i for i, b in enumerate(outputs)}, table or read_regions(s), counts)
    groups = len(outputs) * s.world
    key = writes.which * s.world + writes.rank
    # each (buffer, rank)'s writes: a stable sort, of 16-bit keys where they fit (a radix sort, a few
    # times quicker than one of 64-bit keys; a stable sort's permutation is the same either way)
    low, high = (int(key.min()), int(key.max())) if len(key) else (0, -1)
    fits = bool(len(key)) and 0 <= low and high < 2 ** 16
    order = np.argsort(key.astype(np.uint16) if fits else key, kind="stable")
    if 0 <= low and high < groups:  # (every key a group's, as the per-task rules leave them: counted, not searched)
        bounds = np.zeros(groups + 1, np.int64)
        np.cumsum(np.bincount(key, minlength=groups), out=bounds[1:])
    else:
        bounds = np.searchsorted(key[order], np.arange(groups + 1))
    bounds = bounds.tolist()
    for b, buf in enumerate(outputs):
        for r in range(s.world):
            at = order[bounds[b * s.world + r]:bounds[b * s.world + r + 1]]
            _check_coverage(buf, r, *(x[at] for x in writes.bounds), lambda hit, at=at: writes.writers(at[hit]))


class _MemberWrites:
    """Every member's write into an output, one row each (record after record, each record's members
    in order: the rule counts them, so their order is free, and an error sorts the writers it names):
    its ``rank``, ``bounds`` (rows and columns) and output index (``which``), as arrays; the expanded
    task ids and write positions only of the rows an error names (:meth:`writers`). A record's numbers
    per member are np.repeat of its own, moved by its steps times the member's offset."""

    def __init__(self, outputs: dict[str, int], table: tuple, counts: np.ndarray) -> None:
        recs, f, code = table
        which = np.full(len(code), -1, np.int64)  # per buffer code: its output index
        for name, b in outputs.items():
            which[code[name]] = b
        kept = np.flatnonzero(~f["read"] & (which[recs[:, 0]] >= 0))
        entry = f["entry"][kept]
        cols = np.take(recs, kept, axis=0).astype(np.int64).T  # (the kept records' fields)
        size = counts[entry]  # (members per kept record)
        rec, i = ragged(size)
        o = offsets(i, np.repeat(cols[9], size), np.repeat(cols[10], size)) if cols[9].any() else i

        def moved(field: int, step: int) -> np.ndarray:  # (a step of 0 everywhere moves nothing: skipped)
            at = np.repeat(cols[field], size)
            return at + np.repeat(cols[step], size) * o if cols[step].any() else at

        self.rank, self.which = moved(1, 6), np.repeat(which[cols[0]], size)
        self.bounds = [moved(field, step) for field, step in ((2, 7), (3, 7), (4, 8), (5, 8))]
        nread = np.bincount(f["entry"][f["read"]], minlength=len(counts))  # (the table's reads, per entry)
        self._rec, self._i, self._entry, self._pos = rec, i, entry, f["k"][kept] - nread[entry]
        self._first = np.concatenate(([0], np.cumsum(counts)[:-1]))  # each entry's member 0 in the expanded schedule

    def writers(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Of ``rows``: the expanded id of the member that writes it (member i of the entry whose
        member 0 is task ``first`` is task ``first + i``) and its position among that task's writes."""
        rec = self._rec[rows]
        return self._first[self._entry[rec]] + self._i[rows], self._pos[rec]


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
    # each region adds 1 at (r0, c0) and (r1, c1) and takes 1 at (r0, c1) and (r1, c0)
    diff = (np.bincount(np.concatenate((r0 * width + c0, r1 * width + c1)), minlength=cells)
            - np.bincount(np.concatenate((r0 * width + c1, r1 * width + c0)), minlength=cells))
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
