"""Data mode: the tasks of a schedule applied to real numpy arrays, in simulated-time order.

Every array starts poisoned with NaN except the inputs, so an element nothing wrote shows up in
the comparison with the oracle. Arrays are float32 whatever the schedule's dtype: data mode checks
the schedule's dataflow, not bf16 rounding (the hw backend checks that). With a
:class:`~mkernel.sampling.Plan`, each array holds only the plan's kept rows and columns, and every
task computes only those (large shapes check in seconds).
"""
from __future__ import annotations

import numpy as np

from mkernel.errors import InputError
from mkernel.ir import Op, Region, Schedule, Task


class DataStore:
    """One float32 array per (buffer, rank), allocated when first touched; with a ``plan``, of its
    kept rows and columns only (and ``inputs`` are given at those)."""

    def __init__(self, schedule: Schedule, inputs: dict[str, list[np.ndarray]], plan=None) -> None:
        from mkernel.sampling import Plan

        self.schedule = schedule
        self.plan = plan or Plan.whole(schedule)
        self.arrays: dict[tuple[str, int], np.ndarray] = {}
        for name, per_rank in inputs.items():
            buf = schedule.buffer(name)
            if len(per_rank) != schedule.world:
                raise InputError(f"input {name}: {len(per_rank)} arrays for {schedule.world} ranks")
            for rank, array in enumerate(per_rank):
                if array.shape != self.plan.shape(name):
                    raise InputError(f"input {name} on rank {rank}: shape {array.shape}, "
                                     f"expected {self.plan.shape(name)}")
                self.arrays[(name, rank)] = np.asarray(array, dtype=np.float32)

    def view(self, r: Region) -> np.ndarray:
        key = (r.buffer, r.rank)
        if key not in self.arrays:
            self.arrays[key] = np.full(self.plan.shape(r.buffer), np.nan, dtype=np.float32)
        return self.arrays[key][self.plan.span(r.buffer, 0, r.row0, r.row1), self.plan.span(r.buffer, 1, r.col0, r.col1)]

    def snapshot(self, task: Task) -> list[np.ndarray]:
        """Copies of what a PUT reads, taken when the NIC reads them."""
        return [self.view(r).copy() for r in task.reads]

    def apply(self, task: Task, sources: list[np.ndarray] | None = None) -> None:
        """Perform the task's effect on the arrays (``sources`` replace the reads for a PUT)."""
        if task.op is Op.NOP:
            return
        reads = sources if sources is not None else [self.view(r) for r in task.reads]
        if task.op is Op.ATTN:
            self._attention(task, *reads)
            return
        if task.op is Op.NORM:
            acc, stats = reads
            results = [acc / stats[:, 1:2], stats[:, 0:1] + np.log(stats[:, 1:2])]
        elif task.op is Op.GEMM:
            results = [reads[0] @ reads[1]]
        elif task.op is Op.GATHER:  # the kept rows of the destination, from whole source rows
            dst = task.writes[0]
            results = [reads[0][np.asarray(task.index)[self.plan.offsets(dst.buffer, 0, dst.row0, dst.row1)]]]
        elif task.op is Op.REDUCE:
            total = reads[0].copy()
            for extra in reads[1:]:
                total += extra
            results = [total]
        else:  # COPY, PUT: pairwise
            results = [src.copy() for src in reads]
        for region, value in zip(task.writes, results):
            dst = self.view(region)
            if task.accumulate:
                dst += value
            else:
                dst[...] = value

    def _attention(self, task: Task, q: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
        """Merge one block of keys into the tile's online-softmax state (order-free, like a sum).

        The state (acc, stats = [running max m, running sum l]) starts poisoned; the first merge
        into an untouched row takes the block's values as they are.
        """
        s = (q.astype(np.float64) @ k.T.astype(np.float64)) / np.sqrt(q.shape[1])
        if task.mask:
            q0, k0 = task.mask
            rows = self.plan.offsets(task.reads[0].buffer, 0, task.reads[0].row0, task.reads[0].row1)
            hidden = (k0 + np.arange(k.shape[0]))[None, :] > (q0 + rows)[:, None]
            s = np.where(hidden, -np.inf, s)  # every row keeps its own position visible
        m = s.max(axis=1)
        p = np.exp(s - m[:, None])
        l, o = p.sum(axis=1), p @ v.astype(np.float64)
        acc, stats = self.view(task.writes[0]), self.view(task.writes[1])
        fresh = np.isnan(stats[:, 0])
        m_old = np.where(fresh, -np.inf, stats[:, 0])
        l_old = np.where(fresh, 0.0, stats[:, 1])
        acc_old = np.where(fresh[:, None], 0.0, acc)
        m_new = np.maximum(m_old, m)
        a, b = np.exp(m_old - m_new), np.exp(m - m_new)
        acc[...] = acc_old * a[:, None] + o * b[:, None]
        stats[:, 0], stats[:, 1] = m_new, l_old * a + l * b

    def output(self, name: str) -> list[np.ndarray]:
        buf = self.schedule.buffer(name)
        return [self.view(Region(name, rank, 0, buf.rows, 0, buf.cols)) for rank in range(self.schedule.world)]
