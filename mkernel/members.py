"""Every member's regions of a grouped schedule as numpy arrays, without making the members.

A group's member i reads and writes its regions moved by i times their step (:class:`~mkernel.ir.Step`;
regions never cycle, only signals do), so one record per (entry, region) and the entries' counts
give every member's regions by index arithmetic. Why: a 2 x 8 GEMM+AR of 32768^2 has about a
million members, and making each one a Task cost most of validate() and of the hazard tracker's
set-up. The output-coverage rule (:mod:`mkernel.coverage`) and the hazard tracker's grids
(:mod:`mkernel.sim.cellgrid`) both read their regions from here.
"""
from __future__ import annotations

import numpy as np

from .ir import Region, Task

FIELDS = 9  # a region record: buffer code, rank, row0, row1, col0, col1, rank step, row step, column step


def record(task: Task, k: int, r: Region, buffer: int) -> tuple[int, ...]:
    """The record of region ``k`` of ``task.reads + task.writes`` (``r``), its buffer coded ``buffer``."""
    steps = task.step.regions if task.count > 1 and task.step.regions else None
    dk, dr, dc = steps[k] if steps else (0, 0, 0)
    return (buffer, r.rank, r.row0, r.row1, r.col0, r.col1, dk, dr, dc)


def ragged(sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For items of ``sizes`` parts each: every part's item and its index within the item."""
    which = np.repeat(np.arange(len(sizes)), sizes)
    start = np.zeros(len(sizes), np.int64)
    np.cumsum(sizes[:-1], out=start[1:])
    return which, np.arange(len(which), dtype=np.int64) - start[which]


def member_rows(recs: list[tuple], per_entry: list[int], counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict]:
    """Rows, one per member region, from region records (entry by entry, ``per_entry`` records
    each; ``counts`` the entries' member counts), in the expanded schedule's order: entry after
    entry, member after member, each member's regions in record order. Returns the first row of
    each entry (and the total), the rows per member, and per row: its ``buffer``, ``rank`` and
    bounds (the record's plus the member's index times its steps), its ``entry``, ``member`` index
    and ``record`` (index into ``recs``)."""
    n = np.array(per_entry, np.int64)
    base = np.zeros(len(n) + 1, np.int64)
    np.cumsum(n * counts, out=base[1:])
    entry, j = ragged(n * counts)
    i = j // np.maximum(n[entry], 1)
    first = np.zeros(len(n), np.int64)
    np.cumsum(n[:-1], out=first[1:])
    rec = first[entry] + (j - i * n[entry])
    cols = np.array(recs, np.int64).reshape(-1, FIELDS).T
    dk, dr, dc = (cols[f][rec] * i for f in (6, 7, 8))
    fields = {"buffer": cols[0][rec], "rank": cols[1][rec] + dk, "row0": cols[2][rec] + dr,
              "row1": cols[3][rec] + dr, "col0": cols[4][rec] + dc, "col1": cols[5][rec] + dc,
              "entry": entry, "member": i, "record": rec}
    return base, n, fields
