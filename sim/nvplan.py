"""What an NVLink task (COPY/REDUCE/GATHER) costs a run of the engine (:meth:`Model._nvlink`), worked
out once per shape.

A rank's thousands of copies and reductions differ in where their regions sit, not in what they
cost: the cost is a function of the op, the rank, the accumulate flag, the gather's row count and,
per region, its buffer, rank and shape. :func:`shared` keys plans by exactly that, so the engine
plans a few dozen shapes however many tasks there are (the model keeps them in ``_nv_plans``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mkernel import cost
from mkernel.ir import Schedule, Task
from mkernel.members import RegionTable

if TYPE_CHECKING:
    from .engine import Model
    from .runs import Run


class Shapes:
    """What :func:`shared` keys a plan by, for the entries of a schedule, read off its region table
    (``validate()``'s): an entry's op, rank, accumulate flag, gather rows and read count, and one
    number for the sequence of its regions' (buffer, rank, rows, columns): equal numbers for equal
    sequences. Why: reading those four fields off each of an entry's 3-14 region objects, for each of
    the 49,152 NVLink entries of the 2 x 8 every-node GEMM+AR run, was about 4% of that run, and a key
    of their 12-56 numbers cost 5.7k instructions to make and hash; a key of six is a few hundred.
    An entry is found by its id, which is its position in a built schedule (checked: any other task
    is keyed by its regions, :func:`shared`: five items and a tuple per region, never six items the
    last a number). The numbers are made at the first key asked for: a run with no NVLink entry
    makes none.

    Each entry's plan is kept at its position (:meth:`plan`): the 2 x 8 every-node GEMM+AR runs most of
    its 49,152 NVLink entries once, so a plan kept by ``id(entry)`` in a dict was a miss, a key and a store
    per entry (with :func:`shared`'s, about 5 k instructions an entry); the read count and whether the
    members reach other ranks (a region's rank steps: each run is then one member, with its own plan)
    come from the table with the numbers."""

    def __init__(self, s: Schedule, regions: RegionTable) -> None:
        self.tasks, self._table = s.tasks, regions
        self.ids: list[int] | None = None  # per entry: its regions' sequence's number (made by _read)
        self.reads: list[int] = []  # per entry: its read count (made by _read)
        self.moves: list[bool] = []  # per entry: whether a region's rank steps from member to member
        self.plans: list[tuple | None] = []  # per entry: its plan, once made (plan())

    def _read(self) -> None:
        recs, fields, _ = self._table
        parts = (recs[:, 0], recs[:, 1], recs[:, 3] - recs[:, 2], recs[:, 5] - recs[:, 4])
        sizes = [int(a.max(initial=0)) + 1 for a in parts]
        if min(int(a.min(initial=0)) for a in parts) >= 0 and sizes[0] * sizes[1] * sizes[2] * sizes[3] < 2 ** 63:
            code = parts[0].astype(np.int64)
            for a, size in zip(parts[1:], sizes[1:]):
                code = code * size + a
        else:  # (numbers past 64 bits together: numbered by sorting)
            code = np.unique(np.stack(parts, axis=1), axis=0, return_inverse=True)[1].reshape(-1)
        per = np.bincount(fields["entry"], minlength=len(self.tasks))  # (records lie entry after entry)
        start = np.cumsum(per) - per
        ids: np.ndarray = np.zeros(len(per), np.int64)
        base = 0
        for n in np.unique(per).tolist():  # entries of n regions, numbered by sorting their sequences
            at = np.flatnonzero(per == n)  # (lexsort: np.unique(axis=0) compares rows as bytes: 8x the instructions)
            rows = code[start[at][:, None] + np.arange(n)]
            order = np.lexsort(rows.T[::-1]) if n else np.arange(len(at))
            rows = rows[order]
            new: np.ndarray = np.ones(len(at), bool)
            new[1:] = (rows[1:] != rows[:-1]).any(axis=1)
            ids[at[order]] = base + np.cumsum(new) - 1
            base += int(new.sum())
        self.ids = ids.tolist()
        entry = fields["entry"]
        self.reads = np.bincount(entry[fields["read"]], minlength=len(per)).tolist()
        self.moves = (np.bincount(entry[recs[:, 6] != 0], minlength=len(per)) > 0).tolist()
        self.plans = [None] * len(per)
        self._table = None

    def key(self, task: Task) -> tuple | None:
        """``task``'s plan key, or None where ``task`` is not the entry at its id's position."""
        p = task.id
        if not 0 <= p < len(self.tasks) or self.tasks[p] is not task:
            return None
        if self.ids is None:
            self._read()
        return self._key(task, p)

    def _key(self, task: Task, p: int) -> tuple:
        return task.op, task.rank, task.accumulate, len(task.index), self.reads[p], self.ids[p]  # type: ignore[index]

    def plan(self, m: Model, task: Task) -> tuple | None:
        """Entry ``task``'s runs' plan (:func:`shared`'s), made at the first ask and kept; None where its
        members reach other ranks or ``task`` is not the entry at its id's position (then :meth:`Model._nvlink`
        takes each run's as it did without a table)."""
        p: int = task.id
        tasks: tuple = self.tasks
        if not 0 <= p < len(tasks) or tasks[p] is not task:
            return None
        if self.ids is None:
            self._read()
        made = self.plans[p]
        if made is None and not self.moves[p]:
            key = self._key(task, p)
            made = self.plans[p] = m._nv_plans.get(key) or m._nv_plans.setdefault(key, plan(m, task))
        return made


def shared(m: Model, task: Task) -> tuple:
    """:func:`plan` of ``task``, shared by every task it is the same function of (an entry found in
    the model's :class:`Shapes` by its regions' numbers, any other task by its regions' fields: the
    two kinds of key never meet, and equal plans kept twice are equal)."""
    key = m.nv_shapes.key(task) if m.nv_shapes is not None else None
    if key is None:
        key = (task.op, task.rank, task.accumulate, len(task.index), len(task.reads),  # (then each region's)
               *[(r.buffer, r.rank, r.row1 - r.row0, r.col1 - r.col0) for r in task.reads + task.writes])
    return m._nv_plans.get(key) or m._nv_plans.setdefault(key, plan(m, task))


def plan(m: Model, task: Task) -> tuple:
    """An NVLink task's run cost in model ``m``: whether it touches a peer, its local streaming time
    (before any injected slowdown), its step time, its flows' plan (None without peer transfers),
    the fixed cost merged into its end (a quiet run's peer task) and its round trip after the flow
    (before any stress). Each is a function of what :func:`shared` keys plans by and of the model's
    settings."""
    transfers = cost.remote_transfers(task, m.itemsize)
    local_us = cost.local_bytes(task, m.itemsize) / m.sm_stream
    flows = None
    if transfers:
        half = m.c.nvlink.half_efficiency_bytes
        legs = []
        home = m.home  # a folded run's peer ports are the base's: the flows on them are its images
        for src, dst, b in transfers:
            legs += [(m.nv_out[home[src]], b, b + half), (m.nv_in[home[dst]], b, b + half)]
        flows = m.flows.plan_legs(sum(b + half for _, _, b in transfers), legs, m.sm_copy)
    paid, step_us = cost.touches_peer(task), cost.step_us(task, m.c)
    tail = m.c.gpu.fused_peer_task_us if paid else 0.0  # the fused kernel's fixed cost of a peer task
    return paid, local_us, step_us, flows, tail if m.quiet else 0.0, m.c.nvlink.latency_us + step_us


class Moved:
    """The call at the end of an NVLink run's flow: :meth:`Model._moved` of the run, when its local bytes
    have streamed (``streamed``), its round trip and its merged cost. A native object, called through
    vectorcall, where a ``functools.partial`` of a bound method cost about 1.5 k instructions a run (the
    2 x 8 every-node GEMM+AR has 39.5k such flows)."""

    def __init__(self, m: Model, run: Run, streamed: float, rtt: float, merged: float) -> None:
        self.m, self.run, self.streamed, self.rtt, self.merged = m, run, streamed, rtt, merged

    def __call__(self, _ev: object) -> None:
        self.m._moved(self.run, self.streamed, self.rtt, self.merged)
