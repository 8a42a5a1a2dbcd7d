"""Hazard detection: a consumer that reads bytes before they have arrived.

Every region a task writes counts as one arrival when its bytes land (task completion for local and
NVLink stores, delivery for a network put). When a task starts, every non-input region it reads
must have received all the writes the schedule ever makes to it, except the task's own writes to
the same bytes (an in-place reduce). A read that finds fewer is a hazard: the flag that released
the consumer overtook its data, or a wait is missing or counts too few.

Arrivals are counted on a compressed grid per (buffer, rank): its cells are bounded by the edges of
every region the schedule uses there, so a cell is never split by a task and the grid is about
the size of the tile grid. When a rank's last launch ends, its OUTPUT buffers must have received
every write too, since the caller reads them next. The rule assumes each buffer is single-assignment within an epoch
(plus in-place updates), which every builder keeps.
"""
from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict

import numpy as np

from mkernel.ir import BufferKind, Op, Region, Schedule, Task


class ArrivalTracker:
    """Counts arrivals per cell and checks reads against the writes the schedule promises."""

    def __init__(self, s: Schedule) -> None:
        inputs = {b.name for b in s.buffers if b.kind is BufferKind.INPUT}
        edges: dict = defaultdict(lambda: (set(), set()))
        for task in s.tasks:
            for r in task.reads + task.writes:
                if r.buffer not in inputs:
                    rows, cols = edges[(r.buffer, r.rank)]
                    rows.update((r.row0, r.row1))
                    cols.update((r.col0, r.col1))
        self.edges = {key: (sorted(rows), sorted(cols)) for key, (rows, cols) in edges.items()}
        self.arrived = {key: np.zeros((len(r) - 1, len(c) - 1), np.int32) for key, (r, c) in self.edges.items()}
        self.expected = {key: np.zeros_like(a) for key, a in self.arrived.items()}
        self.writers: dict = defaultdict(list)
        self.landed: set[int] = set()
        self.schedule = s
        self._cells: dict[Region, tuple] = {}
        for task in s.tasks:
            for r in task.writes:
                key, sl = self.cells(r)
                self.expected[key][sl] += 1
                self.writers[key].append(task.id)
        self.hazards: list[dict] = []

    def fresh(self) -> "ArrivalTracker":
        """A tracker for a new run of the same schedule: same grids and expectations, no arrivals."""
        clone = object.__new__(ArrivalTracker)
        clone.__dict__.update(self.__dict__)
        clone.arrived = {key: np.zeros_like(a) for key, a in self.arrived.items()}
        clone.landed, clone.hazards = set(), []
        return clone

    def cells(self, r: Region) -> tuple:
        hit = self._cells.get(r)
        if hit is None:
            key = (r.buffer, r.rank)
            rows, cols = self.edges[key]  # every region edge is a grid edge: exact positions
            hit = self._cells[r] = (key, (slice(bisect_left(rows, r.row0), bisect_left(rows, r.row1)),
                                          slice(bisect_left(cols, r.col0), bisect_left(cols, r.col1))))
        return hit

    def landed_writes(self, task: Task, regions: tuple[Region, ...] | None = None) -> None:
        """The task's writes (or ``regions`` of them) have landed."""
        self.landed.add(task.id)
        for r in task.writes if regions is None else regions:
            key, sl = self.cells(r)
            self.arrived[key][sl] += 1

    def check_reads(self, task: Task, now_us: float, regions: tuple[Region, ...] | None = None) -> None:
        """Record a hazard for each read region whose bytes have not all arrived."""
        for r in task.reads if regions is None else regions:
            if (r.buffer, r.rank) not in self.edges:
                continue  # an input
            key, sl = self.cells(r)
            need = self.expected[key][sl].copy()
            for w in task.writes:
                if (w.buffer, w.rank) == key and task.op is not Op.PUT:
                    wkey, wsl = self.cells(w)
                    lo = (max(sl[0].start, wsl[0].start), max(sl[1].start, wsl[1].start))
                    hi = (min(sl[0].stop, wsl[0].stop), min(sl[1].stop, wsl[1].stop))
                    if lo[0] < hi[0] and lo[1] < hi[1]:
                        need[lo[0] - sl[0].start:hi[0] - sl[0].start, lo[1] - sl[1].start:hi[1] - sl[1].start] -= 1
            have = self.arrived[key][sl]
            if (have < need).any():
                self.hazards.append(self._describe(task, r, now_us))

    def check_outputs_landed(self, rank: int, now_us: float) -> None:
        """When a rank's kernel ends, the caller reads its outputs: every write must have landed."""
        for b in self.schedule.buffers:
            key = (b.name, rank)
            if b.kind is BufferKind.OUTPUT and key in self.arrived and (self.arrived[key] < self.expected[key]).any():
                pending = [t for t in self.writers[key] if t not in self.landed]
                self.hazards.append({"rank": rank, "task": -1, "label": "kernel end", "role": "caller",
                                     "region": f"{b.name}@{rank}", "chunk": next(
                                         (self.schedule.tasks[t].chunk for t in pending if self.schedule.tasks[t].chunk >= 0), -1),
                                     "pending_writers": pending[:4], "time_us": round(now_us, 6)})

    def _describe(self, task: Task, r: Region, now_us: float) -> dict:
        pending = [self.schedule.tasks[t] for t in self.writers[(r.buffer, r.rank)] if t not in self.landed
                   and t != task.id and any(_overlap(w, r) for w in self.schedule.tasks[t].writes)]
        chunk = next((p.chunk for p in pending if p.chunk >= 0), -1)
        return {"rank": task.rank, "task": task.id, "label": task.label, "role": task.role.value,
                "region": str(r), "chunk": chunk, "pending_writers": [p.id for p in pending[:4]],
                "time_us": round(now_us, 6)}


def _overlap(a: Region, b: Region) -> bool:
    return (a.buffer == b.buffer and a.rank == b.rank and a.row0 < b.row1 and b.row0 < a.row1
            and a.col0 < b.col1 and b.col0 < a.col1)


class NullTracker:
    """Tracks nothing: for collapsed runs, whose mirrored writes land in other regions."""

    hazards: list = []

    def check_reads(self, task: Task, now_us: float, regions=None) -> None:
        pass

    def landed_writes(self, task: Task, regions=None) -> None:
        pass

    def check_outputs_landed(self, rank: int, now_us: float) -> None:
        pass
