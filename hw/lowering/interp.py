"""The hw plan interpreter: every rank's plan tables (:mod:`plan`) run on numpy, as the fused kernel
and the host proxy would run them, in a seeded random order that respects only the plan's waits.

Why: the simulator checks a *schedule*; the GPU runs its *lowering* (role queues, flag slots and
epoch targets, heap offsets, gather rows, ring commands, split network flags). This checks the
lowering on a CPU, call after call on fresh inputs, with the symmetric heap and scratch kept
between calls as on the GPU: a wait the lowering lost, or a target it got wrong, lets a task read
the previous call's data, and the output differs from the oracle. What it models:

- each role of each rank claims its queue in order with its block count; a claimed task runs, as
  one step, once every wait's flag reaches ``(epoch - 1) * bumps + count``, then bumps its signals;
  the compute role first runs its GEMM table as the kernel does, row g on block g mod blocks in
  row order, each block claiming from the rest of the queue once its own rows are done;
- a put's ring commands become messages that land later, in random order between ranks (``unordered``
  also lets PUTs to one rank overtake each other; a SIGNAL still lands after the data posted before
  it, the order every transport keeps); a message copies heap bytes and *sets* its flag to the epoch;
- an accumulating copy adds its source into its destination (the kernel's bulk reduce-add, atomic per
  element on the GPU; here each task is one step, so adds never interleave);
- an attention tile merges its key block's softmax into the accumulator and its (m, l) statistics
  as the kernel does under the tile's lock: the first merge of a call (the lock's stamp is older
  than the epoch) overwrites, later ones combine, and the last merge of a folded tile (its NORM
  runs inside it, plan.py) writes out and lse instead of the state;
- calls never overlap (the kernel's call barrier); values are float32 (bf16 rounding is the GPU
  tests' business).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mkernel.errors import DeadlockError, InputError
from mkernel.ir import BufferKind, Op, Schedule

from . import ring
from .layout import (OPS, AttnOperand, Command, GemmOperand, GemmTile, NormOperand, Region, Segment, Signal, Stat, Task,
                     Wait)
from .lower import ROLES
from .plan import Plan, build



@dataclass
class _Message:
    kind: int
    src_rank: int
    dst_rank: int
    flag: int
    nbytes: int
    src_off: int
    dst_off: int
    epoch: int


class Machine:
    """Every rank's memory: buffers as float32 arrays by (name, rank), and flag arrays."""

    def __init__(self, s: Schedule, plans: list[Plan]):
        self.s, self.plans = s, plans
        self.buffers = {b.name: b for b in s.buffers}
        self.heap = plans[0].placement.heap
        self.flags = [np.zeros(p.n_flags, np.int64) for p in plans]
        self.stamps: dict[tuple[int, int], int] = {}  # (rank, attention lock) -> epoch of its last merge
        self.merged: dict[tuple[int, int], int] = {}  # (rank, attention lock) -> merges in that epoch
        self.sm_scale = 1.0 / np.sqrt(self.buffers["Q"].cols) if "Q" in self.buffers else 0.0
        self.arrays: dict[tuple[str, int], np.ndarray] = {}
        for b in s.buffers:  # heap and scratch persist across calls, never zeroed: poisoned once
            if b.kind is BufferKind.SCRATCH or b.name in self.heap:
                for r in range(s.world):
                    self.arrays[(b.name, r)] = np.full((b.rows, b.cols), np.nan, np.float32)

    def region(self, plan: Plan, i: int) -> np.ndarray:
        """A view of region row ``i`` of ``plan``'s table."""
        reg = plan.regions[i]
        c0, cols = int(reg[Region.COL0]), int(reg[Region.COLS])
        return self.rows(plan, i)[:, c0:c0 + cols]

    def rows(self, plan: Plan, i: int) -> np.ndarray:
        """The whole buffer rows of region row ``i`` (statistics live in columns layout.Stat whatever
        the region's columns, as the kernel reads them)."""
        reg = plan.regions[i]
        bid, r0, rows = int(reg[Region.BUF_ID]), int(reg[Region.ROW0]), int(reg[Region.ROWS])
        return self.arrays[(plan.buffers[bid], int(reg[Region.SLOT]) - bid * plan.world)][r0:r0 + rows]

    def heap_rows(self, rank: int, off: int, nbytes: int) -> np.ndarray:
        """The heap buffer rows at byte offset ``off`` (a network message moves whole rows)."""
        for name, base in self.heap.items():
            b = self.buffers[name]
            row_bytes = b.cols * b.itemsize
            if base <= off < base + b.rows * row_bytes:
                first, rem = divmod(off - base, row_bytes)
                if rem or nbytes % row_bytes:
                    raise InputError(f"message at heap offset {off} ({nbytes} B) is not whole rows of {name}")
                return self.arrays[(name, rank)][first:first + nbytes // row_bytes]
        raise InputError(f"heap offset {off} lies in no heap buffer")


def _execute(m: Machine, p: Plan, row: np.ndarray, outbox: list, epoch: int) -> None:
    op = OPS[int(row[Task.OP])]
    nreads, r0, a0, a1 = (int(row[c]) for c in (Task.NREADS, Task.R0, Task.A0, Task.A1))
    if op is Op.GEMM:
        m.region(p, r0 + GemmOperand.C)[:] = m.region(p, r0 + GemmOperand.A) @ m.region(p, r0 + GemmOperand.B)
    elif op is Op.COPY and row[Task.ACCUMULATE]:  # the kernel's bulk reduce-add (layout.COPY_ADD): one pair
        m.region(p, r0 + 1)[:] += m.region(p, r0)
    elif op is Op.COPY:
        for i in range(nreads):
            m.region(p, r0 + nreads + i)[:] = m.region(p, r0 + i)
    elif op is Op.REDUCE:
        m.region(p, r0 + nreads)[:] = sum(m.region(p, r0 + i) for i in range(nreads))
    elif op is Op.GATHER:
        m.region(p, r0 + 1)[:] = m.region(p, r0)[p.aux[a0:a1, Command.SOURCE_ROW]]
    elif op is Op.PUT:
        for cmd in p.aux[a0:a1].tolist():
            outbox.append(_Message(cmd[Command.KIND], p.rank, cmd[Command.DST_RANK], cmd[Command.FLAG],
                                   cmd[Command.NBYTES], cmd[Command.SRC_OFF], cmd[Command.DST_OFF], epoch))
    elif op is Op.ATTN:
        _attn(m, p, row, epoch)
    elif op is Op.NORM:
        acc, stats = m.region(p, r0 + NormOperand.ACC), m.rows(p, r0 + NormOperand.STATS)
        m.region(p, r0 + NormOperand.OUT)[:] = acc / stats[:, Stat.L, None]
        m.rows(p, r0 + NormOperand.LSE)[:, 0] = stats[:, Stat.M] + np.log(stats[:, Stat.L])


def _attn(m: Machine, p: Plan, row: np.ndarray, epoch: int) -> None:
    """One key block's softmax(q k^T * scale) v merged into the tile's (acc, m, l)."""
    r0, q0, k0, lock = (int(row[c]) for c in (Task.R0, Task.Q0, Task.K0, Task.LOCK))
    masked = bool(row[Task.MASKED])
    q, k, v = (m.region(p, r0 + i) for i in (AttnOperand.Q, AttnOperand.K, AttnOperand.V))
    acc, stats = m.region(p, r0 + AttnOperand.ACC), m.rows(p, r0 + AttnOperand.STATS)
    s = (q @ k.T) * m.sm_scale
    if masked:
        s = np.where(np.arange(k0, k0 + len(k))[None, :] <= np.arange(q0, q0 + len(q))[:, None], s, -np.inf)
    m_i = s.max(axis=1)
    safe = np.where(np.isneginf(m_i), 0.0, m_i)
    e = np.exp(s - safe[:, None])
    l_i, acc_i = e.sum(axis=1), e @ v
    fresh = m.stamps.get((p.rank, lock), 0) != epoch
    if not fresh:  # not this call's first merge: combine
        m_o, l_o = stats[:, Stat.M], stats[:, Stat.L]
        m_n = np.maximum(m_o, m_i)
        safe = np.where(np.isneginf(m_n), 0.0, m_n)
        fo, fi = np.exp(m_o - safe), np.exp(m_i - safe)
        acc_i, l_i, m_i = acc * fo[:, None] + acc_i * fi[:, None], l_o * fo + l_i * fi, m_n
    merged = 1 if fresh else m.merged[(p.rank, lock)] + 1
    a0, a1 = int(row[Task.A0]), int(row[Task.A1])
    if a1 > a0 and merged == p.aux[a0, Command.MERGES]:  # a folded tile's last merge: its norm too (plan.py)
        m.region(p, r0 + AttnOperand.OUT)[:] = acc_i / l_i[:, None]
        m.rows(p, r0 + AttnOperand.LSE)[:, 0] = m_i + np.log(l_i)
    else:
        acc[:] = acc_i
        stats[:, Stat.M], stats[:, Stat.L] = m_i, l_i
    m.stamps[(p.rank, lock)], m.merged[(p.rank, lock)] = epoch, merged


def _gemm_tile(m: Machine, p: Plan, g: int) -> None:
    """GEMM table row ``g`` (plan.gemm_table): C tile = A rows x B columns over its segment's K range,
    then its signal."""
    t = p.gemm_tiles[g]
    seg = next(sg for sg in p.segments if sg[Segment.FIRST] <= g < sg[Segment.END])
    (a_names, b_name), k0, kc = p.gemm_operands, int(seg[Segment.K0]), int(seg[Segment.K_COLS])
    rows, cols = int(t[GemmTile.C_ROWS]), int(t[GemmTile.C_COLS])
    a = m.arrays[(a_names[int(seg[Segment.A_INDEX])], p.rank)]
    b = m.arrays[(b_name, p.rank)]
    bid, owner = divmod(int(t[GemmTile.C_SLOT]), p.world)
    c = m.arrays[(p.buffers[bid], owner)]
    a_r0, b_c0, c_r0, c_c0 = (int(t[k]) for k in (GemmTile.A_ROW0, GemmTile.B_COL0, GemmTile.C_ROW0, GemmTile.C_COL0))
    c[c_r0:c_r0 + rows, c_c0:c_c0 + cols] = a[a_r0:a_r0 + rows, k0:k0 + kc] @ b[k0:k0 + kc, b_c0:b_c0 + cols]
    if t[GemmTile.SIG_RANK] >= 0:
        m.flags[int(t[GemmTile.SIG_RANK])][int(t[GemmTile.SIG_SLOT])] += 1


def _deliver(m: Machine, msg: _Message) -> None:
    if msg.kind == ring.PUT:
        m.heap_rows(msg.dst_rank, msg.dst_off, msg.nbytes)[:] = m.heap_rows(msg.src_rank, msg.src_off, msg.nbytes)
    m.flags[msg.dst_rank][msg.flag] = msg.epoch


def _deliverable(inflight: list[_Message], unordered: bool, fence: bool) -> list[int]:
    """Messages that may land next: the oldest per (source, destination) pair on an ordered
    transport; on an unordered one any PUT, and a SIGNAL once no PUT posted before it on its pair
    is still in flight (``fence``; without it, any message: the transports' old defect)."""
    out, seen = [], set()
    for i, msg in enumerate(inflight):
        pair = (msg.src_rank, msg.dst_rank)
        if not unordered:
            if pair not in seen:
                out.append(i)
        elif msg.kind == ring.PUT or pair not in seen or not fence:
            out.append(i)
        if not unordered or msg.kind == ring.PUT:
            seen.add(pair)
    return out


def call(m: Machine, inputs: dict[str, list[np.ndarray]], epoch: int, rng: np.random.Generator,
         unordered: bool = False, fence: bool = True) -> dict[str, list[np.ndarray]]:
    """One call of every rank (``epoch`` = 1, 2, ...): bound inputs given, outputs poisoned, then
    random steps until every task ran and every message landed. Returns the outputs by rank.
    ``fence=False`` lets an unordered transport land a SIGNAL before the data posted ahead of it."""
    s, plans = m.s, m.plans
    if not 1 <= epoch <= plans[0].last_epoch:
        raise InputError(f"{s.kernel} call {epoch}: epochs run from 1 to {plans[0].last_epoch} (64-bit flags)")
    for b in s.buffers:
        for r in range(s.world):
            if b.kind is BufferKind.INPUT and b.name not in m.heap:
                m.arrays[(b.name, r)] = np.asarray(inputs[b.name][r], np.float32)
            elif b.kind is BufferKind.INPUT:
                m.arrays[(b.name, r)][:] = inputs[b.name][r]  # staged into the heap before the call
            elif b.kind is BufferKind.OUTPUT:
                m.arrays[(b.name, r)] = np.full((b.rows, b.cols), np.nan, np.float32)
    queues = []  # per rank and role: the plan, its first table row, the blocks, the tasks not run yet
    tiles = []  # per rank's compute role: each block's GEMM table rows not run yet
    for p in plans:
        first = 0
        for role, (role_tasks, blocks) in enumerate(zip(p.role_tasks, p.blocks)):
            skip = len(p.gemm_tiles) if role == 0 else 0
            queues.append((p, first, int(blocks), list(range(skip, int(role_tasks)))))
            if role == 0:
                tiles.append([list(range(b, skip, max(1, int(blocks)))) for b in range(int(blocks))])
            first += int(role_tasks)
    inflight: list[_Message] = []
    while True:
        steps = []
        for q, (p, first, blocks, pending) in enumerate(queues):
            free = blocks if q % len(ROLES) else sum(not rows for rows in tiles[q // len(ROLES)])
            for k in pending[:free]:  # the tasks its free blocks have claimed
                row = p.tasks[first + k]
                if all(m.flags[p.rank][int(w[Wait.SLOT])] >= (epoch - 1) * int(w[Wait.BUMPS]) + int(w[Wait.COUNT])
                       for w in p.waits[int(row[Task.W0]):int(row[Task.W1])]):
                    steps.append((q, k))
        steps += [(-2, r * 65536 + b) for r, per_block in enumerate(tiles) for b, rows in enumerate(per_block) if rows]
        steps += [(-1, i) for i in _deliverable(inflight, unordered, fence)]
        if not steps:
            break
        q, k = steps[int(rng.integers(len(steps)))]
        if q == -1:
            _deliver(m, inflight.pop(k))
            continue
        if q == -2:
            r, b = divmod(k, 65536)
            _gemm_tile(m, plans[r], tiles[r][b].pop(0))
            continue
        p, first, _, pending = queues[q]
        row = p.tasks[first + k]
        _execute(m, p, row, inflight, epoch)
        for sig in p.signals[int(row[Task.S0]):int(row[Task.S1])]:
            m.flags[int(sig[Signal.RANK])][int(sig[Signal.SLOT])] += 1
        pending.remove(k)
    stuck = [f"rank {p.rank} {ROLES[q % len(ROLES)].value}: {s.tasks[int(p.tasks[first + k][Task.TASK_ID])].describe()}"
             for q, (p, first, _, pending) in enumerate(queues) for k in pending]
    if stuck:
        raise DeadlockError(f"{s.kernel} call {epoch}: {len(stuck)} tasks never ran, first {stuck[0]}")
    return {b.name: [m.arrays[(b.name, r)].copy() for r in range(s.world)]
            for b in s.buffers if b.kind is BufferKind.OUTPUT}


def fast_forward(m: Machine, epoch: int) -> None:
    """Put every rank's flags where ``epoch`` calls leave them (a slot: epoch x its bumps per call),
    so the next call is ``epoch + 1``: the top of the epoch range, tested without 2^50 calls."""
    for p in m.plans:
        for w in p.waits:
            m.flags[p.rank][int(w[Wait.SLOT])] = epoch * int(w[Wait.BUMPS])


def machine(s: Schedule) -> Machine:
    """Every rank's plan of ``s`` on fresh memory."""
    return Machine(s, build(s))
