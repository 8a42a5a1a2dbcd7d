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

Groups (``Task.count`` > 1) are tracked without expanding them: every member's regions are found
from the group's :class:`~mkernel.ir.Step` by numpy index arithmetic when the tracker is made, as
lists of grid cells, member after member (:mod:`mkernel.sim.cellgrid`). A run of members checks
all their reads at once when it starts and lands all their writes when it ends. A hazard names the
member as the expanded schedule (:func:`mkernel.ir.expand`) numbers it, with its own label and
region, so a grouped run reports what the flat run of the same schedule reports.
"""
from __future__ import annotations

from bisect import bisect_right
from functools import cached_property

import numpy as np

from mkernel.ir import BufferKind, MemberRef, Region, Schedule, Task
from mkernel.members import RegionTable

from .cellgrid import Cells


class ArrivalTracker:
    """Counts arrivals per cell and checks reads against the writes the schedule promises.

    Its methods take a queue entry of the schedule and a span of its members, or a plain task made
    by :meth:`member` (numbered as in the expanded schedule). ``regions``: ``s``'s region table, where
    it was read already (:class:`~mkernel.sim.cellgrid.Cells`)."""

    def __init__(self, s: Schedule, regions: RegionTable | None = None) -> None:
        self.schedule = s
        self.cells = Cells(s, regions)
        c = self.cells
        self._wstart, self._wcell = c.write.start, c.write.cell
        self.hazards: list[dict] = []
        self._by_grid: tuple | None = None  # the write rows sorted by grid, made at the first report

    @cached_property
    def _pos(self) -> dict[int, int]:
        """Each entry's position, by the id of its object (made in C: a third of the comprehension's
        time). Made where first read: a logged run's puts and verdict find their entries by
        :meth:`_entry` and the log's ids (:meth:`~mkernel.sim.hazardlog.LoggedTracker._entries`), so
        its 53k entries on the 2 x 8 GEMM+AR every-node run (7 ms) are listed only by a live
        tracker, a replay or a task that is not where its id says."""
        return dict(zip(map(id, self.schedule.tasks), range(len(self.schedule.tasks))))

    def _entry(self, task: Task) -> int | None:
        """The position of entry ``task`` (None for a plain member made by :meth:`member`): its id,
        where the schedule holds it there (ids are positions in a valid schedule), else looked up."""
        p, tasks = task.id, self.schedule.tasks
        if 0 <= p < len(tasks) and tasks[p] is task:
            return p
        return self._pos.get(id(task))

    # Each cell's arrivals and each member's landing (by expanded id): made where first read, as a logged
    # run (sim/hazardlog.py) counts nothing as it goes, and reads them only to replay a run with hazards.
    @cached_property
    def arrived(self) -> np.ndarray:
        """Arrivals per cell (made at the first read: a logged run without hazards never reads it)."""
        return np.zeros(self.cells.total, np.int32)

    @cached_property
    def landed(self) -> np.ndarray:
        """Whether each member's writes have landed (made at the first read, as ``arrived``)."""
        return np.zeros(self.cells.uid0[-1], bool)

    # The cells' tables the live methods below read one item at a time: made where first read, as a
    # run that logs its calls (sim/hazardlog.py) reads them only to replay a run with hazards (each
    # list is 115k Python ints on the 2 x 8 GEMM+AR every-node run: fresh pages, about 5 ms each).
    @cached_property
    def _rstart(self) -> np.ndarray:
        return self.cells.read.start

    @cached_property
    def _rcell(self) -> np.ndarray:
        return self.cells.read.cell

    @cached_property
    def _need(self) -> np.ndarray:
        return self.cells.need

    @cached_property
    def _once(self) -> list[bool]:
        return self.cells.write_once

    @cached_property
    def _uid0(self) -> list[int]:
        return self.cells.uid0.tolist()

    @cached_property
    def _rbase(self) -> list[int]:
        return self.cells.read.base.tolist()

    @cached_property
    def _nr(self) -> list[int]:
        return self.cells.read.n.tolist()

    @cached_property
    def _wbase(self) -> list[int]:
        return self.cells.write.base.tolist()

    @cached_property
    def _nw(self) -> list[int]:
        return self.cells.write.n.tolist()

    def fresh(self) -> "ArrivalTracker":
        """A tracker for a new run of the same schedule: same grids and expectations, no arrivals."""
        clone = object.__new__(ArrivalTracker)
        clone.__dict__.update(self.__dict__)
        clone.__dict__.pop("arrived", None)  # (made afresh where first read: ArrivalTracker.arrived)
        clone.__dict__.pop("landed", None)
        clone.hazards = []
        return clone

    def finish(self) -> None:
        """The run has ended: ``hazards`` is complete (this tracker fills it as it goes)."""

    def member(self, task: Task, i: int) -> Task | MemberRef:
        """Member ``i`` of entry ``task``, numbered as the expanded schedule numbers it: a plain task,
        or for a group's member its :class:`~mkernel.ir.MemberRef` (the member is not built)."""
        p = self._entry(task)
        if p is None:
            raise ValueError(f"{task.describe()} is not an entry of the tracked schedule")
        uid = int(self.cells.uid0[p]) + i  # (a run's puts: not worth the list)
        return MemberRef(task, i, uid) if task.count > 1 else task.member(i, uid)

    def _member_of(self, task: Task) -> tuple[int, int, int]:
        """(entry, member, 1) of a plain task made by :meth:`member` (its id is its expanded id)."""
        p = bisect_right(self._uid0, task.id) - 1
        return p, task.id - self._uid0[p], 1

    def landed_writes(self, task: Task, first: int = 0, n: int | None = None) -> None:
        """The writes of members ``first .. first + n - 1`` (all from ``first`` by default) have landed."""
        p = self._pos.get(id(task))
        if p is None:
            p, first, n = self._member_of(task)
        elif n is None:
            n = task.count - first
        u = self._uid0[p] + first
        self.landed[u:u + n] = True
        k = self._nw[p]
        if k:
            lo = self._wbase[p] + first * k
            a, b = self._wstart[lo], self._wstart[lo + n * k]
            if self._once[p]:  # no cell twice: a plain add
                self.arrived[self._wcell[a:b]] += 1
            else:
                np.add.at(self.arrived, self._wcell[a:b], 1)

    def check_reads(self, task: Task, now_us: float, first: int = 0, n: int | None = None) -> None:
        """Record a hazard for each read region of members ``first .. first + n - 1`` (all from
        ``first`` by default) whose bytes have not all arrived, member by member."""
        p = self._pos.get(id(task))
        if p is None:
            p, first, n = self._member_of(task)
        elif n is None:
            n = task.count - first
        k = self._nr[p]
        if not k:
            return
        lo = self._rbase[p] + first * k
        a, b = self._rstart[lo], self._rstart[lo + n * k]
        if a == b:
            return
        short = self.arrived[self._rcell[a:b]] < self._need[a:b]
        if not short.any():
            return
        c = self.cells
        rows = np.unique(np.searchsorted(c.read.start, np.flatnonzero(short) + a, "right") - 1)
        entry = self.schedule.tasks[p]
        for row in rows.tolist():
            i, q = divmod(row - self._rbase[p], k)
            m = entry.member(i, self._uid0[p] + i)
            self.hazards.append(self._describe(m, m.reads[c.read_of(p, q)], now_us))

    def unobserved(self, rank: int, launch: int, tasks: list[Task]) -> bool:
        """Whether nothing could tell when within their launch the writes of ``tasks`` (one
        launch's queue on ``rank``) land: they read no tracked bytes and write only ``rank``'s, and
        every task that reads what they write runs on ``rank`` in a later launch (which starts when
        this one has ended). Such a launch may be played without events (:mod:`mkernel.sim.tiles`),
        its writes landed at its end."""
        c = self.cells
        pos = [self._pos[id(t)] for t in tasks]
        if any(self._nr[p] for p in pos):
            return False
        spans = [(self._wstart[self._wbase[p]], self._wstart[self._wbase[p + 1]]) for p in pos]
        written = np.concatenate([self._wcell[a:b] for a, b in spans] or [np.zeros(0, np.int32)])
        if not written.size:
            return True
        grids = np.searchsorted(c.grid_base, written, "right") - 1
        if (c.grid_rank[grids] != rank).any():
            return False
        mark = np.zeros(c.total, bool)
        mark[written] = True
        d = c.distinct  # (the reads that repeat one of these read the same cells)
        hit = np.flatnonzero(mark[d.cell])
        rows = np.searchsorted(d.start, hit, "right") - 1
        readers = np.unique(np.searchsorted(d.base[:-1], rows, "right") - 1)
        return all(t.rank == rank and t.launch > launch for t in (self.schedule.tasks[p] for p in readers.tolist()))

    def check_outputs_landed(self, rank: int, now_us: float) -> None:
        """When a rank's kernel ends, the caller reads its outputs: every write must have landed."""
        c = self.cells
        for b in self.schedule.buffers:
            g = c.grid.get((b.name, rank))
            if b.kind is not BufferKind.OUTPUT or g is None:
                continue
            lo, hi = c.grid_base[g], c.grid_base[g + 1]
            if (self.arrived[lo:hi] < c.expected[lo:hi]).any():
                uids, _ = self._writers(g)
                pending = uids[~self.landed[uids]].tolist()
                self.hazards.append({"rank": rank, "task": -1, "label": "kernel end", "role": "caller",
                                     "region": f"{b.name}@{rank}", "chunk": self._chunk(pending),
                                     "pending_writers": pending[:4], "time_us": round(now_us, 6)})

    def _describe(self, task: Task, r: Region, now_us: float) -> dict:
        uids, rects = self._writers(self.cells.grid[(r.buffer, r.rank)])
        a0, a1, b0, b1 = self.cells.rect(r)
        over = (rects[0] < a1) & (a0 < rects[1]) & (rects[2] < b1) & (b0 < rects[3])
        keep = ~self.landed[uids] & (uids != task.id) & np.isin(uids, uids[over])
        pending = uids[keep].tolist()
        return {"rank": task.rank, "task": task.id, "label": task.label, "role": task.role.value,
                "region": str(r), "chunk": self._chunk(pending), "pending_writers": pending[:4],
                "time_us": round(now_us, 6)}

    def _writers(self, g: int) -> tuple[np.ndarray, np.ndarray]:
        """The members that write grid ``g``, by expanded id, once per region they write there (in
        the expanded schedule's order), and the cell rectangle of each of those regions (4 rows)."""
        if self._by_grid is None:
            c = self.cells
            order = np.argsort(c.write.grid, kind="stable")
            bounds = np.searchsorted(c.write.grid[order], np.arange(len(c.grid_base)))
            self._by_grid = (order, bounds)
        order, bounds = self._by_grid
        rows = order[bounds[g]:bounds[g + 1]]
        return _write_uids(self.cells, rows), _write_rects(self.cells, rows)

    def _chunk(self, uids: list[int]) -> int:
        """The chunk of the first of these members that carries one (-1 if none does)."""
        for u in uids:
            p = bisect_right(self._uid0, u) - 1
            t, i = self.schedule.tasks[p], u - self._uid0[p]
            chunk = t.chunk + i * t.step.chunk if t.count > 1 else t.chunk
            if chunk >= 0:
                return chunk
        return -1


def _write_uids(c: Cells, rows: np.ndarray) -> np.ndarray:
    """The member (by expanded id) each write row is of."""
    base, n = c.write.base, c.write.n
    p = np.searchsorted(base[:-1], rows, "right") - 1
    return c.uid0[p] + (rows - base[p]) // np.maximum(n[p], 1)


def _write_rects(c: Cells, rows: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each write row's cell rectangle (as :meth:`~mkernel.sim.cellgrid.Cells.rect`; empty rows as
    0, 0, 0, 0), from its first and last cells."""
    s0, s1 = c.write.start[rows], c.write.start[rows + 1]
    full = s1 > s0
    if not c.write.cell.size:
        return (np.zeros(len(rows), np.int64),) * 4
    g = c.write.grid[rows]
    width = np.maximum(c.cols.cells[g], 1)
    first = c.write.cell[np.where(full, s0, 0)] - c.grid_base[g]
    last = c.write.cell[np.where(full, s1 - 1, 0)] - c.grid_base[g]
    a0, b0 = first // width, first % width
    a1, b1 = last // width + 1, last % width + 1
    return tuple(np.where(full, x, 0) for x in (a0, a1, b0, b1))


class NullTracker:
    """Tracks nothing: for collapsed runs, whose mirrored writes land in other regions, and quiet runs."""

    hazards: list = []

    def unobserved(self, rank: int, launch: int, tasks: list[Task]) -> bool:
        return True

    def member(self, task: Task, i: int) -> Task | MemberRef:
        return MemberRef(task, i, task.id + i) if task.count > 1 else task

    def finish(self) -> None:
        pass

    def check_reads(self, task: Task, now_us: float, first: int = 0, n: int | None = None) -> None:
        pass

    def landed_writes(self, task: Task, first: int = 0, n: int | None = None) -> None:
        pass

    def check_outputs_landed(self, rank: int, now_us: float) -> None:
        pass
