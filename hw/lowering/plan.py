"""A rank's plan: the lowered role tables packed into the flat int64 arrays the fused kernel walks.

:mod:`lower` keeps the schedule's vocabulary (buffer ids, regions, slots). A plan adds what the
device needs and nothing the device could get wrong:

- **placement**, **network flags** and **commands** (:mod:`remote`): which buffers live in the
  symmetric heap, the arrival flag of each network put, and each put's ring commands with heap
  offsets precomputed;
- **waits** carry the slot's bumps per call, so the kernel computes epoch targets itself;
- **locks**: attention tiles that merge into the same accumulator hold its lock (the IR treats the
  merge as order-free, the hardware needs it atomic), and the lock's stamp says whether the state
  is from this call;
- **the GEMM table**: the compute queue's leading GEMM tasks that nothing makes wait, one row per
  output tile, which the kernel runs in one flattened, software-pipelined tile loop
  (:func:`gemm_table`);
- **folded norms**: a NORM that waits for all the merges of its tile, signals nothing and shares
  its rows with no other task runs inside the last of those merges (the lock counts them;
  :mod:`fold` says when that is sound): that merge writes out and lse from registers, so the fp32
  accumulator is neither stored nor read back, and the NORM's claim goes. A folded ATTN row
  carries the NORM's writes as its OUT and LSE regions (layout.AttnOperand) and its merge count as
  its one aux row (layout.Command.MERGES).

The columns of every table are named in :mod:`layout`. Every rule the kernel relies on is checked
here, so a schedule the kernel cannot run is refused with a :class:`~mkernel.errors.ScheduleError`
before any launch.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mkernel.controller import ns
from mkernel.errors import ScheduleError
from mkernel.ir import Op, Schedule
from mkernel.ir import Task as IrTask  # the schedule's task (layout.Task names the device row's columns)

from .fold import folded_norms, tile
from .layout import (ATTN_QUERY_ROWS, COMMAND_WIDTH, COPY_ADD, GEMM_TILE_WIDTH, MAX_SEGMENTS, OP_CODE, OPS, REGION_WIDTH,
                     SEGMENT_WIDTH, SIGNAL_WIDTH, TASK_WIDTH, WAIT_WIDTH, AttnOperand, GemmOperand, GemmTile,
                     NormOperand, Region, Segment, Task, Wait)
from .lower import ROLES, Lowered, QueueTask, lower
from .remote import NetFlags, Placement, commands, network_flags, placement, refuse

INT64_MAX = (1 << 63) - 1
GEMM_TILE = (128, 256, 64)  # BM, BN, BK of the kernel's GEMM tiles (fused.constexprs compiles them)
# operand dtypes in operand order (layout.GemmOperand, AttnOperand before OUT, NormOperand)
KERNEL_DTYPES = {Op.GEMM: ("bf16", "bf16", "bf16"), Op.COPY: None, Op.REDUCE: None, Op.GATHER: None,
                 Op.ATTN: ("bf16", "bf16", "bf16", "fp32", "fp32"), Op.NORM: ("fp32", "fp32", "bf16", "fp32")}
VECTOR_OPERANDS = {Op.ATTN: (AttnOperand.Q, AttnOperand.K, AttnOperand.V, AttnOperand.ACC),
                   Op.NORM: (NormOperand.ACC, NormOperand.OUT)}


@dataclass(frozen=True)
class Plan:
    """One rank's fused kernel: role grid, tables, and the slot bookkeeping."""

    rank: int
    world: int
    gpus_per_node: int
    blocks: tuple[int, int, int, int]  # blocks per role, in ROLES order (compute, intra, send, recv)
    role_tasks: tuple[int, int, int, int]  # tasks per role queue
    tasks: np.ndarray  # int64 [n, layout.Task], role queues one after the other
    regions: np.ndarray  # int64 [*, layout.Region]
    waits: np.ndarray  # int64 [*, layout.Wait]
    signals: np.ndarray  # int64 [*, layout.Signal]
    aux: np.ndarray  # int64 [*, layout.Command]: gather rows (column 0) or ring commands
    gemm_tiles: np.ndarray  # int64 [g, layout.GemmTile]: the compute queue's first g tasks as GEMM tiles
    segments: np.ndarray  # int64 [<= MAX_SEGMENTS, layout.Segment]: runs of gemm_tiles with one A and K
    n_flags: int  # slots per rank, barrier and sink slots included (the same on every rank)
    n_locks: int  # attention locks (layout.Lock): one per query block of each tile (ATTN_QUERY_ROWS rows)
    placement: Placement
    buffers: tuple[str, ...]  # buffer id -> name
    slot_names: tuple  # slot -> Signal (for error messages)
    lowered: Lowered
    last_epoch: int  # the last call whose flag values fit 64 bits, the same on every rank (:func:`last_epoch`)

    @property
    def grid(self) -> int:
        return sum(self.blocks)

    @property
    def sink(self) -> int:
        """A slot nobody waits on: where data-only PUTs set their flag."""
        return self.n_flags - 1

    @property
    def arrive0(self) -> int:
        """Flag ``arrive0 + p`` holds the last call rank p entered (the start barrier)."""
        return self.n_flags - 2 - 2 * self.world

    @property
    def exit0(self) -> int:
        """Flag ``exit0 + p`` holds the last call rank p finished (guards overwriting shared inputs)."""
        return self.n_flags - 2 - self.world

    @property
    def go(self) -> int:
        """Set by block 0 once every peer has entered the call; the other blocks wait for it."""
        return self.n_flags - 2

    def flag_name(self, slot: int) -> str | None:
        """What flag ``slot`` of this rank is, for error messages: its schedule signal, a network
        message's own arrival flag, a call-barrier flag (naming the peer it waits for), or None."""
        if 0 <= slot < len(self.slot_names):
            return f"signal {self.slot_names[slot]}"
        for first, what in ((self.arrive0, "rank {} entered this call"), (self.exit0, "rank {} finished the last call")):
            if first <= slot < first + self.world:
                return f"call barrier: {what.format(slot - first)}"
        if slot == self.go:
            return "call barrier: go, set by block 0 once every peer entered (block 0's wait names the missing peer)"
        if slot == self.sink:
            return "sink of data-only puts"
        return "arrival flag of one network put" if 0 <= slot < self.n_flags else None

    @property
    def gemm_operands(self) -> tuple[tuple[str, ...], str] | None:
        """The A buffers (one or two) and the B buffer of this rank's GEMM tiles, or None without
        GEMMs: the kernel takes a host-built TMA descriptor for each (:func:`tiles._gemm`). Raises
        ScheduleError for more, or for operands on another rank."""
        gemm = self.tasks[self.tasks[:, Task.OP] == OP_CODE[Op.GEMM]]
        if not len(gemm):
            return None
        a_rows, b_rows = self.regions[gemm[:, Task.R0] + GemmOperand.A], self.regions[gemm[:, Task.R0] + GemmOperand.B]
        a_ids, b_ids = sorted(set(a_rows[:, Region.BUF_ID].tolist())), sorted(set(b_rows[:, Region.BUF_ID].tolist()))
        ops = np.concatenate([a_rows, b_rows])
        local = (ops[:, Region.SLOT] == ops[:, Region.BUF_ID] * self.world + self.rank).all()
        if len(a_ids) > 2 or len(b_ids) > 1 or not local:
            raise ScheduleError(f"rank {self.rank}: GEMM tiles read A from {[self.buffers[i] for i in a_ids]} and B "
                                f"from {[self.buffers[i] for i in b_ids]}; the kernel takes at most two A buffers and "
                                f"one B, all this rank's own (host-built TMA descriptors)")
        return tuple(self.buffers[i] for i in a_ids), self.buffers[b_ids[0]]

    @property
    def gemm_c(self) -> str | None:
        """The C buffer of the GEMM table's tiles (the kernel's TMA store descriptor), or None."""
        if not len(self.gemm_tiles):
            return None
        return self.buffers[int(self.gemm_tiles[0, GemmTile.C_SLOT]) // self.world]

    @property
    def ops(self) -> frozenset[str]:
        """The op kinds this rank's kernel runs: its compile-time op set, accumulating COPYs named
        layout.COPY_ADD ("copy" only where a plain one runs)."""
        adds = (self.tasks[:, Task.OP] == OP_CODE[Op.COPY]) & (self.tasks[:, Task.ACCUMULATE] != 0)
        plain = frozenset(OPS[int(op)].value for op in self.tasks[~adds, Task.OP])
        return plain | ({COPY_ADD} if adds.any() else set())


def build(s: Schedule, rank: int | None = None, work: Callable[[IrTask], float] | None = None) -> list[Plan]:
    """Plans of every rank (or of ``rank`` only, as a one-element list). ``work`` (us of one SM per
    task, :func:`mkernel.cost.sm_work_us`) fills the work column the GPU's controller sums."""
    lowered, place, net, n_flags = _shared(s)
    ranks = range(s.world) if rank is None else (rank,)
    last = last_epoch(lowered)
    return [_plan(s, lowered, place, r, n_flags, net, work, last) for r in ranks]


def last_epoch(lowered: list[Lowered]) -> int:
    """The last epoch (call) whose flags fit a signed 64-bit word on every rank: after call E a slot
    holds E x its bumps per call, and waits poll for at most that. Out of reach in practice (a slot
    bumped 2^13 times per call gets there after 35 years of one call per microsecond), and the
    executor refuses the call after it rather than let a flag overflow."""
    most = max((int(low.slot_bumps.max()) for low in lowered if len(low.slot_bumps)), default=1)
    return INT64_MAX // max(1, most)


_LAST: list = [None, None]  # the last schedule planned, and _shared's result for it


def _shared(s: Schedule) -> tuple[list[Lowered], Placement, NetFlags, int]:
    """What every rank's plan shares: the schedule validated and lowered, the heap placement, the
    network flags, the flag count. Kept for the last schedule object (frozen, so its identity is its
    value): a rank sizes its Context and then builds its Executor from the same schedule, and at
    32768^2 on 2 x 2 validating and lowering take ~7 s of the ~7.2 s a plan costs. One entry, by
    identity (a schedule's hash would walk its hundreds of thousands of tasks); it keeps that
    schedule alive until the next one is planned, as its executor does anyway."""
    if _LAST[0] is not s:
        s.validate()
        lowered = lower(s)
        net = network_flags(s, lowered)
        # then per rank: an arrival and an exit flag per peer (the call barriers), the go flag, the sink
        n_flags = max(len(low.slot_bumps) + len(net.extra.get(r, ())) for r, low in enumerate(lowered)) + 2 * s.world + 2
        _LAST[:] = [s, (lowered, placement(s), net, n_flags)]
    return _LAST[1]


def _plan(s: Schedule, lowered: list[Lowered], place: Placement, rank: int, n_flags: int, net: NetFlags,
          work: Callable[[IrTask], float] | None, last: int) -> Plan:
    low = lowered[rank]
    buffers = {b.name: b for b in s.buffers}
    bid = {name: i for i, name in enumerate(low.buffers)}
    tasks, regions, waits, signals, aux = [], [], [], [], []
    locks: dict[tuple[str, int], int] = {}  # tile -> its first lock
    n_lock_words = 0
    counts = []
    folds = folded_norms(s, low)
    for role in ROLES:
        table = low.roles.get(role)
        counts.append(0 if table is None else len(table.tasks))
        if table is None:
            continue
        for row, tid in zip(table.tasks, table.task_ids):
            task = s.tasks[int(tid)]
            _check(s, task, buffers)
            fold = folds.get(tile(task)) if task.op is Op.ATTN else None
            if task.op is Op.NORM and folds.get(tile(task), (None,))[0] is task:
                counts[-1] -= 1  # runs inside its tile's last merge
                continue
            r0 = len(regions)
            for reg in task.reads + task.writes + (fold[0].writes if fold else ()):
                b = buffers[reg.buffer]
                regions.append((bid[reg.buffer] * s.world + reg.rank, reg.row0, reg.col0, reg.row1 - reg.row0,
                                reg.col1 - reg.col0, b.cols, b.rows, bid[reg.buffer]))  # layout.Region's order
            w0 = len(waits)
            for wait in low.roles[role].waits[row[QueueTask.W0]:row[QueueTask.W1]]:
                slot, count = wait[Wait.SLOT], wait[Wait.COUNT]
                subs = net.split.get((rank, int(slot)))
                if subs is None:
                    waits.append((slot, count, low.slot_bumps[slot]))  # layout.Wait's order
                elif count == len(subs):
                    waits.extend((f, 1, 1) for f in subs)
                else:
                    raise refuse(s, task, f"it waits for {count} of the {len(subs)} network messages that bump "
                                          f"{low.slot_names[slot]}; on hw it can wait for all of them only")
            s0 = len(signals)
            if task.op is not Op.PUT:  # a put's arrival flag travels in its last command
                signals.extend(tuple(x) for x in low.roles[role].signals[row[QueueTask.S0]:row[QueueTask.S1]])
            a0 = len(aux)
            if task.op is Op.GATHER:
                aux.extend((i, 0, 0, 0, 0, 0, 0, 0) for i in task.index)  # Command.SOURCE_ROW
            elif task.op is Op.PUT:
                aux.extend(commands(task, buffers, place, net.flag_of[task.id], n_flags - 1))
            elif fold:
                aux.append((fold[1], 0, 0, 0, 0, 0, 0, 0))  # Command.MERGES
            lock = -1
            if task.op is Op.ATTN:
                if tile(task) not in locks:  # one lock per query block of the tile (layout.ATTN_QUERY_ROWS)
                    locks[tile(task)] = n_lock_words
                    n_lock_words += -(-(task.reads[0].row1 - task.reads[0].row0) // ATTN_QUERY_ROWS)
                lock = locks[tile(task)]
            q0, k0 = task.mask if task.mask else (0, 0)
            tasks.append((OP_CODE[task.op], len(task.reads), r0, len(regions), w0, len(waits), s0, len(signals),
                          a0, len(aux), q0, k0, int(bool(task.mask)), lock, task.id,
                          max(1, ns(work(task))) if work else 0, int(task.accumulate)))  # layout.Task's order
    launch = s.launches[0]
    blocks = tuple(launch.budget(r) for r in ROLES)
    for role, n, nb in zip(ROLES, counts, blocks):
        if n and nb < 1:
            raise ScheduleError(f"{s.kernel}/{s.variant}: rank {rank} has {n} {role.value} tasks and no "
                                f"{role.value} SMs")

    def arr(rows, width):
        return np.asarray(rows, dtype=np.int64).reshape(-1, width)

    tasks_a, regions_a, signals_a = arr(tasks, TASK_WIDTH), arr(regions, REGION_WIDTH), arr(signals, SIGNAL_WIDTH)
    empty = (arr([], GEMM_TILE_WIDTH), arr([], SEGMENT_WIDTH))
    plan = Plan(rank, s.world, s.gpus_per_node, blocks, tuple(counts), tasks_a, regions_a, arr(waits, WAIT_WIDTH),
                signals_a, arr(aux, COMMAND_WIDTH), *empty, n_flags, n_lock_words, place, low.buffers, low.slot_names,
                low, last)
    operands = plan.gemm_operands  # refuses GEMM operands the kernel cannot take, at plan time
    if operands is None:
        return plan
    a2 = plan.buffers.index(operands[0][1]) if len(operands[0]) > 1 else -1
    compute = tasks_a[:counts[0]]
    return dataclasses.replace(plan, **dict(zip(("gemm_tiles", "segments"), gemm_table(
        compute, regions_a, signals_a, a2, _flows(compute, signals_a, lowered)))))


def _flows(rows: np.ndarray, signals: np.ndarray, lowered: list[Lowered]) -> list[int]:
    """Per task row, a key of its first signal's rank and name (-1 where it signals nothing)."""
    keys: dict[tuple[int, str], int] = {}
    out = []
    for t in rows:
        if t[Task.S1] > t[Task.S0]:
            rank, slot = (int(x) for x in signals[t[Task.S0]])
            out.append(keys.setdefault((rank, lowered[rank].slot_names[slot].name), len(keys)))
        else:
            out.append(-1)
    return out


def gemm_table(compute: np.ndarray, regions: np.ndarray, signals: np.ndarray, a2_buf: int, flows: list[int]
               ) -> tuple[np.ndarray, np.ndarray]:
    """The compute queue's leading GEMM tasks as one row per output tile (layout.GemmTile), in runs
    of one A operand and K range (layout.Segment). The kernel runs these rows in a flattened tile
    loop, blocks taking rows by index (row g on block g mod blocks), so that Triton pipelines the
    next tile's loads under this tile's epilogue; the rest of the queue is claimed as before.

    A task qualifies when nothing can make it wait: it has no waits (the loop prefetches the next
    tile's operands before this tile is done, so a wait there would guard nothing), one BM x BN
    output tile that a TMA store can write whole (a full tile, or one that ends at its buffer's
    edges, where TMA clips), the C buffer of the table's first tile (one store descriptor), at
    most one signal, and a K range that both A's and B's buffer end at (TMA zero-fills past an
    edge, not inside a buffer). The table stops at the first task that does not, and after
    MAX_SEGMENTS runs. ``flows``: per compute row, a key of its signal's rank and name (-1: none),
    which :func:`_grouped` keeps together."""
    bm, bn, _bk = GEMM_TILE
    tiles, segments, keys = [], [], []
    c_slot = None
    for t, flow in zip(compute, flows):
        if t[Task.OP] != OP_CODE[Op.GEMM] or t[Task.W1] > t[Task.W0] or t[Task.S1] - t[Task.S0] > 1:
            break
        a, b, c = (regions[t[Task.R0] + k] for k in (GemmOperand.A, GemmOperand.B, GemmOperand.C))
        c_slot = c[Region.SLOT] if c_slot is None else c_slot
        whole = (c[Region.ROWS] == bm or c[Region.ROW0] + c[Region.ROWS] == c[Region.BUF_ROWS]) and \
            (c[Region.COLS] == bn or c[Region.COL0] + c[Region.COLS] == c[Region.LD])
        if c[Region.ROWS] > bm or c[Region.COLS] > bn or not whole or c[Region.SLOT] != c_slot \
                or b[Region.ROW0] != a[Region.COL0] or b[Region.ROWS] != a[Region.COLS] \
                or b[Region.ROW0] + b[Region.ROWS] != b[Region.BUF_ROWS]:
            break
        key = (int(a[Region.BUF_ID] == a2_buf), int(a[Region.COL0]), int(a[Region.COLS]))
        if not segments or tuple(segments[-1][Segment.A_INDEX:]) != key:
            if len(segments) == MAX_SEGMENTS:
                break
            segments.append([len(tiles), len(tiles), *key])
        sig = signals[t[Task.S0]] if t[Task.S1] > t[Task.S0] else (-1, -1)
        tiles.append((a[Region.ROW0], b[Region.COL0], c[Region.SLOT], c[Region.LD], c[Region.ROW0], c[Region.COL0],
                      c[Region.ROWS], c[Region.COLS], *sig))
        keys.append(flow)
        segments[-1][Segment.END] = len(tiles)
    table = np.asarray(tiles, np.int64).reshape(-1, GEMM_TILE_WIDTH)
    for first, end, *_ in segments:
        table[first:end] = _grouped(table[first:end], np.asarray(keys[first:end], np.int64))
    return table, np.asarray(segments, np.int64).reshape(-1, SEGMENT_WIDTH)


GROUP_M = 8  # row tiles per group of the table's order (the standalone GEMM's L2-friendly order, hw/kernels/gemm.py)


def _grouped(rows: np.ndarray, flows: np.ndarray) -> np.ndarray:
    """Table rows in grouped order: within each run of rows whose signals have one rank and name
    (``flows``: an owner's tiles, or one destination's tiles ready to push, stay together, in the
    queue's order of runs, so the reduction or the pushes can start as early as before), GROUP_M
    row tiles at a time, column after column. A wave of the blocks then reads GROUP_M row blocks of
    A and a few column blocks of B, which stay in L2, instead of one row block and all of B."""
    if len(rows) < 2:
        return rows
    bm, bn, _bk = GEMM_TILE
    r = rows[:, GemmTile.C_ROW0] // bm
    c = rows[:, GemmTile.C_COL0] // bn
    run = np.concatenate([[0], np.cumsum(flows[1:] != flows[:-1])])
    order = np.lexsort((r % GROUP_M, c, r // GROUP_M, run))
    return rows[order]


def _check(s: Schedule, task: IrTask, buffers: dict) -> None:
    """The rules the kernel's op code relies on."""
    dtypes = KERNEL_DTYPES.get(task.op)
    regions = task.reads + task.writes
    if dtypes is None and task.op in (Op.COPY, Op.REDUCE, Op.GATHER):
        dtypes = ("bf16",) * len(regions)
    if dtypes is not None:
        have = tuple(buffers[r.buffer].dtype for r in regions)
        if have != dtypes:
            raise refuse(s, task, f"its operands are {have}; the kernel's {task.op.value} takes {dtypes}")
    if task.accumulate and task.op is Op.COPY and len(task.reads) != 1:
        raise refuse(s, task, f"it adds {len(task.reads)} regions into their destinations; the kernel's accumulating "
                              f"copy (a bulk reduce-add) moves one")
    if task.accumulate and task.op not in (Op.ATTN, Op.COPY):
        raise refuse(s, task, "it accumulates into its destination; on hw only attention merges and copies (bulk "
                              "reduce-adds) add atomically")
    if task.op is Op.GEMM:
        a, b = task.reads
        if a.col1 != buffers[a.buffer].cols:
            raise refuse(s, task, f"its K range ends at column {a.col1} of {a.buffer}, not at the buffer's edge "
                                  f"({buffers[a.buffer].cols}); TMA zero-fills only past the edge")
        for name in (a.buffer, b.buffer):
            if buffers[name].cols % 8:
                raise refuse(s, task, f"{name} has {buffers[name].cols} columns; TMA needs rows that are a "
                                      f"multiple of 16 bytes (8 bf16 columns)")
    # regions the kernel moves in 16-byte vectors (attention stats and lse are per-row scalars)
    vectors = {Op.COPY: regions, Op.REDUCE: regions, Op.GATHER: regions, Op.GEMM: task.writes}.get(task.op, ())
    if task.op in VECTOR_OPERANDS:  # the dtype check above has counted their regions
        vectors = tuple(regions[i] for i in VECTOR_OPERANDS[task.op])
    if vectors:
        for r in vectors:
            if r.col0 % 8 or (r.col1 - r.col0) % 8 or buffers[r.buffer].cols % 8:
                raise refuse(s, task, f"{r} (columns {r.col0}:{r.col1} of a {buffers[r.buffer].cols}-column buffer) "
                                      f"is not in 8-column units; the kernel moves 16-byte vectors")
    if task.op is Op.PUT:
        if sum(r.size * buffers[r.buffer].itemsize for r in task.reads) >= 2**32:
            raise refuse(s, task, "it moves 4 GiB or more; a ring command carries a 32-bit byte count")
        for r in regions:
            if r.col0 != 0 or r.col1 != buffers[r.buffer].cols:
                raise refuse(s, task, f"{r} is not whole rows; a network message moves one contiguous range")
