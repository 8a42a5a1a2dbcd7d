"""Pure cost functions: microseconds and bytes from a task's operands and specs. The simulator spends
them, and the GPU backend writes :func:`sm_work_us` into the plan's work column for the adaptive
SM partition, so both backends estimate a task's work with the same function.

- A GEMM tile runs on one SM: ``max(flops / (per-SM matmul rate x efficiency(tile)), HBM bytes /
  per-SM HBM share)``, where HBM bytes are the output plus the ``l2_operand_miss`` share of the
  operand reads. HBM is split statically by SM: each SM owns ``hbm_gb_per_s / sms``. The per-SM
  matmul rate rises above the all-SM share while fewer SMs compute (:func:`sm_speed`); an
  attention tile's does not (:func:`attn_us`).
- A communication task runs on one SM: its NVLink transfers share ``sm_copy_gb_per_s`` and its
  local HBM bytes stream at ``sm_stream_gb_per_s``; in the fused kernel each of its steps adds a
  load round trip, a peer's or its own HBM's (:func:`step_us`), but for a push (an accumulating
  copy into a peer: bulk reduce-adds, waited for once at the task's end).
"""
from __future__ import annotations

import math

from mkernel.cluster import Cluster
from mkernel.ir import Op, Region, Task


def bytes_per_us(gb_per_s: float) -> float:
    """GB/s (1e9 bytes per second) in bytes per microsecond."""
    return gb_per_s * 1e3


def nbytes(r: Region, itemsize: dict[str, int]) -> float:
    return float(r.size * itemsize[r.buffer])


def sm_speed(c: Cluster, busy: int) -> float:
    """How much faster than ``matmul_tflops / sms`` one SM computes while ``busy`` SMs of its GPU
    compute: min(sm_matmul_tflops, matmul_tflops / busy) over the all-SM share, at least 1."""
    g = c.gpu
    if g.sm_matmul_tflops <= 0 or busy <= 0:
        return 1.0
    share = g.matmul_tflops / g.sms
    return max(1.0, min(g.sm_matmul_tflops / share, g.sms / busy))


def gemm_us(task: Task, itemsize: dict[str, int], c: Cluster, busy: int = 0) -> float:
    return gemm_us_at(task, itemsize, c, sm_speed(c, busy))


def gemm_us_at(task: Task, itemsize: dict[str, int], c: Cluster, speed: float) -> float:
    """A GEMM tile at ``speed`` times the all-SM per-SM rate (:func:`sm_speed`)."""
    a, b = task.reads
    out = task.writes[0]
    (m, k), (_, n) = a.shape, b.shape
    flops = 2.0 * m * n * k
    # Operand panels are shared by neighbouring tiles and mostly served from L2; the output is not.
    operands = (nbytes(a, itemsize) + nbytes(b, itemsize)) * c.gpu.l2_operand_miss
    moved = operands + nbytes(out, itemsize) * (2 if task.accumulate else 1)
    sm_flops_per_us = c.gpu.matmul_tflops * 1e6 / c.gpu.sms * tile_efficiency(m * n, c) * speed
    sm_hbm = bytes_per_us(c.gpu.hbm_gb_per_s) / c.gpu.sms
    return max(flops / sm_flops_per_us, moved / sm_hbm)


def attn_us(task: Task, itemsize: dict[str, int], c: Cluster) -> float:
    """An attention tile on one SM: 4 q k d flops at ``attention_efficiency`` of the all-SM matmul
    share (softmax work between the two matmuls), or its operand traffic, whichever is longer. No
    :func:`sm_speed` headroom: on an H200 pair ring attention's tiles ran no faster per SM on 68-116
    compute SMs than on all 132 (its splits in docs/results/2026-12-01-validation.md), unlike GEMM
    tiles, whose headroom calibrate measures."""
    q, k, v = task.reads
    flops = 4.0 * q.shape[0] * k.shape[0] * q.shape[1] * (0.5 if task.mask else 1.0)  # a causal diagonal block
    moved = sum(nbytes(r, itemsize) for r in task.reads) + 2 * sum(nbytes(r, itemsize) for r in task.writes)
    sm_flops_per_us = c.gpu.matmul_tflops * 1e6 / c.gpu.sms * c.gpu.attention_efficiency
    return max(flops / sm_flops_per_us, moved / (bytes_per_us(c.gpu.hbm_gb_per_s) / c.gpu.sms))


def tile_efficiency(elems: int, c: Cluster) -> float:
    """Share of the per-SM matmul rate a tile of ``elems`` outputs reaches.

    Smaller tiles reuse each loaded operand less: at a quarter of ``full_tile_elems`` an SM runs at
    half rate (efficiency = sqrt(elems / full), at most 1).
    """
    return min(1.0, math.sqrt(elems / c.gpu.full_tile_elems))


def _read_bytes(task: Task, r: Region, itemsize: dict[str, int]) -> float:
    """A gather reads only its indexed rows of the (possibly larger) region it names."""
    if task.op is Op.GATHER:
        return float(len(task.index) * r.shape[1] * itemsize[r.buffer])
    return nbytes(r, itemsize)


def local_bytes(task: Task, itemsize: dict[str, int]) -> float:
    """Bytes a COPY/REDUCE/GATHER moves through its own rank's HBM (local reads, local writes)."""
    total = sum(_read_bytes(task, r, itemsize) for r in task.reads if r.rank == task.rank)
    total += sum(nbytes(r, itemsize) for r in task.writes if r.rank == task.rank)
    if task.accumulate:
        total += sum(nbytes(r, itemsize) for r in task.writes if r.rank == task.rank)
    return total


def remote_transfers(task: Task, itemsize: dict[str, int]) -> list[tuple[int, int, float]]:
    """(source rank, destination rank, bytes) for each NVLink transfer of a COPY/REDUCE.

    Reads of a peer's region are pulls (peer -> task's rank); writes to a peer are pushes.
    """
    assert task.op in (Op.COPY, Op.REDUCE, Op.GATHER), f"{task.describe()} is not an NVLink op"
    out = [(r.rank, task.rank, _read_bytes(task, r, itemsize)) for r in task.reads if r.rank != task.rank]
    out += [(task.rank, r.rank, nbytes(r, itemsize)) for r in task.writes if r.rank != task.rank]
    return out


def steps(task: Task, c: Cluster) -> int:
    """Steps of a COPY/REDUCE/GATHER as the fused kernel takes them: one per ``fused_step_rows x
    fused_step_cols`` tile of each region it moves (a reduce reads all its sources in one step; a
    gather's rows are its index). Each step waits for its loads before the next (:func:`step_us`)."""
    if task.op not in (Op.COPY, Op.REDUCE, Op.GATHER):
        return 0
    rows, cols = c.gpu.fused_step_rows, c.gpu.fused_step_cols

    def tiles(nrows: int, ncols: int) -> int:
        return math.ceil(nrows / rows) * math.ceil(ncols / cols)
    if task.op is Op.GATHER:
        return tiles(len(task.index), task.writes[0].shape[1])
    if task.op is Op.REDUCE:
        return tiles(*task.writes[0].shape)
    return sum(tiles(*r.shape) for r in task.reads)


def touches_peer(task: Task) -> bool:
    return any(r.rank != task.rank for r in task.reads + task.writes)


def is_push(task: Task) -> bool:
    """An accumulating COPY into a peer (GEMM+RS's push, mkernel/builders/_gemm_rs_push.py)."""
    return task.op is Op.COPY and task.accumulate and any(r.rank != task.rank for r in task.writes)


def step_us(task: Task, c: Cluster) -> float:
    """The load round trips a fused communication task waits: a peer's (NVLink) per step when it
    touches a peer, else its own HBM's. A push waits none: the kernel issues its reduce-adds as bulk
    stores, several stages in flight, and waits once, at the end, for them to complete (the
    per-task peer cost, ``fused_peer_task_us``, stands for that round trip), so its cost is its
    bytes, an NVLink write at the per-SM rate, plus that fixed cost."""
    if is_push(task):
        return 0.0
    per = c.gpu.fused_peer_step_us if touches_peer(task) else c.gpu.fused_local_step_us
    return steps(task, c) * per if per else 0.0


def sm_work_us(task: Task, itemsize: dict[str, int], c: Cluster) -> float:
    """What a task costs the SM that runs it, uncontended: the remaining-work measure of the
    adaptive SM partition (:mod:`mkernel.controller`)."""
    if task.op is Op.GEMM:
        return gemm_us(task, itemsize, c)
    if task.op is Op.ATTN:
        return attn_us(task, itemsize, c)
    if task.op is Op.NORM:
        return local_bytes(task, itemsize) / bytes_per_us(c.gpu.sm_stream_gb_per_s)
    if task.op in (Op.COPY, Op.REDUCE, Op.GATHER):
        remote = sum(b for _, _, b in remote_transfers(task, itemsize))
        return max(local_bytes(task, itemsize) / bytes_per_us(c.gpu.sm_stream_gb_per_s),
                   remote / bytes_per_us(c.sm_copy_gb_per_s)) + c.nvlink.latency_us \
            + step_us(task, c) + (c.gpu.fused_peer_task_us if touches_peer(task) else 0.0)
    if task.op is Op.PUT:
        return c.proxy.gpu_enqueue_us
    return 0.0
