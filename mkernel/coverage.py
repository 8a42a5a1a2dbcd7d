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

from operator import attrgetter

import numpy as np

from .errors import ScheduleError
from .ir import Buffer, BufferKind, Schedule
from .members import member_rows, read_regions


def check_outputs(s: Schedule, buffers: dict[str, Buffer], table: tuple | None = None,
                  counts: np.ndarray | None = None) -> None:
    """Raise :class:`ScheduleError` on the first OUTPUT element (by buffer, rank, then row-major)
    not written ``writes_per_element`` times, naming the element, its count and its writers;
    ``table``: :func:`mkernel.members.read_regions` of ``s``, and ``counts`` its entries' member
    counts, where they were made already."""
    outputs = [b for b in s.buffers if b.kind is BufferKind.OUTPUT]
    if not outputs:
        return
    rank, row0, row1, col0, col1, ids, pos, which = _member_writes(s, {b.name: i for i, b in enumerate(outputs)},
                                                                   table or read_regions(s), counts)
    key = which * s.world + rank
    order = np.argsort(key, kind="stable")
    key = key[order]
    for b, buf in enumerate(outputs):
        for r in range(s.world):
            lo, hi = np.searchsorted(key, [b * s.world + r, b * s.world + r + 1])
            at = order[lo:hi]
            _check_coverage(buf, r, row0[at], row1[at], col0[at], col1[at], ids[at], pos[at])


def _member_writes(s: Schedule, outputs: dict[str, int], table: tuple,
                   counts: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """Every member's write into an output: its rank, rows, columns, expanded task id, position
    among its task's writes and output buffer index, as arrays (one row per member region)."""
    recs, f, code = table
    which = np.full(len(code), -1, np.int64)  # per buffer code: its output index
    for name, b in outputs.items():
        which[code[name]] = b
    kept = ~f["read"] & (which[recs[:, 0]] >= 0)
    if not kept.any():
        return tuple(np.zeros(0, np.int64) for _ in range(8))
    entry = f["entry"][kept]
    if counts is None:
        counts = np.fromiter(map(attrgetter("count"), s.tasks), np.int64, len(s.tasks))
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))  # each entry's member 0 in the expanded schedule
    nread = np.bincount(f["entry"][f["read"]], minlength=len(s.tasks))  # (the table's reads, per entry)
    _, _, m = member_rows(recs[kept], np.bincount(entry, minlength=len(counts)), counts)
    return (m["rank"], m["row0"], m["row1"], m["col0"], m["col1"], first[m["entry"]] + m["member"],
            (f["k"][kept] - nread[entry])[m["record"]], which[m["buffer"]])


def _check_coverage(buf: Buffer, rank: int, row0: np.ndarray, row1: np.ndarray, col0: np.ndarray,
                    col1: np.ndarray, ids: np.ndarray, pos: np.ndarray) -> None:
    rows = np.unique(np.concatenate(([0, buf.rows], row0, row1)))
    cols = np.unique(np.concatenate(([0, buf.cols], col0, col1)))
    r0, r1 = np.searchsorted(rows, row0), np.searchsorted(rows, row1)
    c0, c1 = np.searchsorted(cols, col0), np.searchsorted(cols, col1)
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
    hit = (row0 <= row) & (row < row1) & (col0 <= col) & (col < col1)
    by = [int(t) for t in ids[hit][np.lexsort((pos[hit], ids[hit]))]]  # in task order, then write order
    raise ScheduleError(
        f"output {buf.name} on rank {rank}: element ({row}, {col}) is written {count[i, j]} times, "
        f"expected {buf.writes_per_element}" + (f" (by tasks {by})" if by else " (by no task)"))
