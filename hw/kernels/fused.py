"""The fused kernel: one persistent Triton kernel that walks a rank's plan (see :mod:`plan`).

Why one kernel for every op: a schedule is data, so the device code is an interpreter of role
tables. Blocks take roles by index (compute, intra, send, recv, in that order); each role's blocks
claim the tasks of their queue in order from a counter, like the simulator's SMs. A task waits for
its slots to reach the epoch's targets, does its op, and bumps its signals with a system-scope
release. The op set is a compile-time switch, so each fused op compiles to its own kernel with only
the code it uses (a GEMM op carries no attention code, and the other way round).

The compute role first runs the plan's GEMM table (:func:`plan.gemm_table`: the queue's leading GEMM
tiles that nothing makes wait) in one flattened tile loop per segment, blocks taking rows by index,
so Triton pipelines the next tile's TMA loads under this tile's epilogue, as in a standalone
persistent GEMM; then it claims the rest of its queue like every other role.

Progress: the grid is the schedule's SM budget (at most the SMs this rank may use) and every block
fits on one SM, so all blocks are co-resident and a spinning block never keeps another from
running. Every wait is bounded (``timeout_ns`` inside a call; ``barrier_timeout_ns``, minutes, for peers
entering it, since ranks skew by host work between calls) and stops early once any block has recorded an
error or the proxy has aborted; the first error names rank, role, slot, epoch, seen and expected,
and the schedule task (:class:`mkernel.hw.runtime.ErrorBlock`).

Memory order: a signal to a peer is ``atom.add.release.sys`` after a block barrier and a
``fence.acq_rel.sys``; a signal to the own GPU is a gpu-scope release after the barrier (far
cheaper, and every reader is on this GPU); waits are ``ld.acquire.sys``; the compute role adds ``fence.proxy.async`` after a wait, because its
TMA loads read through the async proxy what peers wrote through the generic one. Ring records are
committed with ``st.release.sys`` after the body (``csrc/mk_ring.h`` specifies the protocol).

Epochs live on the device (read + 1 at start, stored by the last block to finish, which also
resets the claim counters), so calls need no host synchronisation and no flag is ever zeroed.

Adaptive kernels (``ADAPTIVE``, :mod:`mkernel.controller`): the compute and intra blocks are movable. At each task
boundary a block re-evaluates the simulator's policy (:func:`mkernel.controller.split`, compiled
here as ``adaptive._policy``) from two shared words and picks its next role (``_steer``, ``_pick``); send
and receive blocks keep theirs. A role with unclaimed work always keeps at least one block, so the
progress argument above still holds.

The pieces: :mod:`sync` (waits, ring producer, barriers), :mod:`tiles` (the data ops on registers),
:mod:`bulk` and its steps (the data ops on bulk copies) and :mod:`adaptive` (the SM partition).
"""
from __future__ import annotations

import triton
import triton.language as tl

from mkernel.ir import Op

from ..knobs import DATA_PATHS, DEFAULTS
from ..lowering.layout import (ATTN_QUERY_ROWS, COMMAND_WIDTH, COPY_ADD, OP_CODE, SIGNAL_WIDTH, TASK_WIDTH, WAIT_WIDTH, Command,
                               Signal, Task, Wait)
from ..lowering.plan import GEMM_TILE
from .sync import _bump, _clock, _fence_async, _fence_sys, _go_bound, _last_block, _push, _raw, _st_release64, \
    _tell_peers, _wait, enter_kernel
from . import bulk, bulk_copy, bulk_reduce, bulk_tensor
from .adaptive import ACTIVE, BLOCKED, CTRL, LOG_ENTRIES, START, UNIT_NS, WORK, _bit, _pick, _reset, _steer
from .tiles import _attn, _copy, _gather, _gemm, _gemm_table, _norm, _reduce

C = tl.constexpr
GEMM, COPY, REDUCE, GATHER, PUT, ATTN, NORM = (C(OP_CODE[op]) for op in (Op.GEMM, Op.COPY, Op.REDUCE, Op.GATHER,
                                                                         Op.PUT, Op.ATTN, Op.NORM))
DATA_REGISTER, DATA_AUTO, DATA_BULK = (C(DATA_PATHS.index(p)) for p in ("register", "auto", "bulk"))
SB, RB, LAG, LINE = C(bulk.STAGE_BYTES), C(bulk.REDUCE_BYTES), C(bulk.LAG), C(bulk_copy.LINE_MIN)  # bulk steps' shape
TW, CW, WW, SW = C(TASK_WIDTH), C(COMMAND_WIDTH), C(WAIT_WIDTH), C(SIGNAL_WIDTH)
T_OP, T_NREADS, T_R0, T_W0, T_W1, T_S0, T_S1, T_A0, T_A1, T_Q0, T_K0, T_MASKED, T_LOCK, T_TASK, T_WORK, T_ACC = (
    C(int(c)) for c in (Task.OP, Task.NREADS, Task.R0, Task.W0, Task.W1, Task.S0, Task.S1, Task.A0, Task.A1, Task.Q0,
                        Task.K0, Task.MASKED, Task.LOCK, Task.TASK_ID, Task.WORK_NS, Task.ACCUMULATE))
W_SLOT, W_COUNT, W_BUMPS = (C(int(c)) for c in Wait)
S_RANK, S_SLOT = (C(int(c)) for c in Signal)
C_KIND, C_DST, C_FLAG, C_BYTES, C_SRC, C_DSTOFF = (C(int(c)) for c in (Command.KIND, Command.DST_RANK, Command.FLAG,
                                                                   Command.NBYTES, Command.SRC_OFF, Command.DST_OFF))

__all__ = ["fused_kernel", "enter_kernel", "signature", "constexprs", "NUM_WARPS", "NUM_STAGES"]


# Arguments whose values differ between the ranks of one op. Triton would specialise the binary on
# them (a value of 1 becomes a constant, a multiple of 16 an alignment hint), so the ranks of an
# emulated cluster, sharing one GPU under MPS, would each compile and run a different binary of the
# same op; with these left unspecialised every rank runs one binary, compiled once.
PER_RANK_ARGS = ("rank", "arrive0", "exit0", "go", "n0", "n1", "n2", "n3", "b0", "b1", "b2", "b3", "a2_buf",
                 "ctrl0", "work", "n_seg", "n_gemm")


@triton.jit(do_not_specialize=PER_RANK_ARGS)
def fused_kernel(tasks, regions, waits, signals, aux, gemm_tiles, segments, bases, maps, flag_bases, claims, epoch_ptr,
                 done_ptr, locks, a_host, a2_host, b_host, c_host, a2_buf, records, ctl, head, capacity, err32, err64, err_host,
                 rank, world, gpn, arrive0, exit0, go, timeout_ns, barrier_timeout_ns, sm_scale,
                 n0, n1, n2, n3, b0, b1, b2, b3, n_seg, n_gemm, state, log, ctrl0, work, min_sms, hysteresis, link_sms,
                 BARRIER: tl.constexpr, HAS_GEMM: tl.constexpr, HAS_COPY: tl.constexpr, HAS_COPY_ADD: tl.constexpr,
                 HAS_REDUCE: tl.constexpr, HAS_GATHER: tl.constexpr, HAS_PUT: tl.constexpr, HAS_ATTN: tl.constexpr,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, CR: tl.constexpr, CC: tl.constexpr,
                 D: tl.constexpr, BQ: tl.constexpr, BKV: tl.constexpr, DATA: tl.constexpr, ADAPTIVE: tl.constexpr,
                 LOG: tl.constexpr):
    pid = tl.program_id(0)
    epoch = tl.load(epoch_ptr, volatile=True) + 1
    role = (pid >= b0).to(tl.int32) + (pid >= b0 + b1).to(tl.int32) + (pid >= b0 + b1 + b2).to(tl.int32)
    own_flags = tl.load(flag_bases + rank)
    # what every task reads, grouped once (runtime values only: a tuple of constexprs is not one)
    tabs = (regions, waits, signals, aux, bases, maps, flag_bases, locks)  # the plan's tables, the call's addresses
    gemm = (a_host, a2_host, b_host, a2_buf)  # the GEMM operands' descriptors
    ring = (records, ctl, head, capacity)  # the command ring to the proxy
    call = (rank, epoch, own_flags, timeout_ns, sm_scale, err32, err64)  # this call on this rank
    if ADAPTIVE:
        if pid == 0:
            tl.store(state + START, _clock())
    if BARRIER:  # every peer has entered this call: it finished the last one and staged its inputs
        if pid == 0:
            _tell_peers(arrive0, flag_bases, epoch, rank, world, gpn, records, ctl, head, capacity, timeout_ns,
                        err32, err64, HAS_PUT)
            for p in range(world):  # the peers' progress between calls: the long bound (HwKnobs.barrier_timeout_s)
                if p != rank:
                    _wait(own_flags + 8 * (arrive0 + p), epoch, arrive0 + p, epoch, -1, rank, role,
                          barrier_timeout_ns, err32, err64, ctl)
            _st_release64(own_flags + 8 * go, epoch)
        else:  # when a peer never enters, the error recorded first is block 0's, naming that peer's arrival
            # flag, not this go flag (sync._go_bound); waiters leave as soon as it is recorded
            _wait(own_flags + 8 * go, epoch, go, epoch, -1, rank, role, _go_bound(barrier_timeout_ns, timeout_ns),
                  err32, err64, ctl)
    movable = b0 + b1
    if ADAPTIVE:
        if pid < movable:  # compute and intra blocks follow the shared target: a role per task (_pick)
            live = True
            while live:
                i = tl.atomic_add(claims + role, 1, sem="relaxed", scope="gpu")
                if i < tl.where(role == 0, n0, n1):
                    row = tasks + (tl.where(role == 0, 0, n0) + i) * TW
                    units = (tl.load(row + T_WORK) + UNIT_NS - 1) // UNIT_NS
                    tl.atomic_add(state + WORK, -(units << (32 * role)), sem="relaxed", scope="gpu")
                    _task(row, tabs, gemm, ring, call, role, state, _bit(BLOCKED + 8 * role),
                          HAS_GEMM, HAS_COPY, HAS_COPY_ADD, HAS_REDUCE, HAS_GATHER, HAS_PUT, HAS_ATTN, BM, BN, BK, CR,
                          CC, D, BQ, BKV, DATA)
                tl.atomic_add(state + CTRL, -_bit(ACTIVE + 8 * role), sem="relaxed", scope="gpu")
                rem_c, rem_i = _steer(state, log, movable, min_sms, hysteresis, link_sms, LOG)
                role = _pick(state, rem_c, rem_i, movable, role)
                live = role >= 0
        else:
            _serve(tasks, tabs, gemm, ring, call, claims, role, n0, n1, n2, n3, 0,
                   HAS_GEMM, HAS_COPY, HAS_COPY_ADD, HAS_REDUCE, HAS_GATHER, HAS_PUT, HAS_ATTN, BM, BN, BK, CR, CC, D, BQ,
                   BKV, DATA)
    else:
        if HAS_GEMM:  # the compute queue's leading GEMM tiles, in a flattened loop (plan.gemm_table)
            if role == 0:
                _gemm_table(gemm_tiles, segments, n_seg, pid, b0, a_host, a2_host, b_host, c_host, flag_bases, rank,
                            BM, BN, BK)
        _serve(tasks, tabs, gemm, ring, call, claims, role, n0, n1, n2, n3, n_gemm,
               HAS_GEMM, HAS_COPY, HAS_COPY_ADD, HAS_REDUCE, HAS_GATHER, HAS_PUT, HAS_ATTN, BM, BN, BK, CR, CC, D, BQ,
               BKV, DATA)
    # the last block to finish resets the call's counters and stores the epoch for the next launch
    if _last_block(done_ptr, b0 + b1 + b2 + b3):
        tl.store(done_ptr, 0)
        for r in range(4):
            tl.store(claims + r, 0)
        if ADAPTIVE:
            _reset(state, ctrl0, work)
        tl.store(epoch_ptr, epoch)
        # the error word to pinned host memory: the executor sees a failed call with no copy launched
        tl.store(_raw(err_host, tl.int64), tl.load(err64, volatile=True))
        if BARRIER:  # tell peers this call is over here: they may overwrite what this rank read of theirs
            _fence_sys()
            _tell_peers(exit0, flag_bases, epoch, rank, world, gpn, records, ctl, head, capacity, timeout_ns,
                        err32, err64, HAS_PUT)


@triton.jit
def _serve(tasks, tabs, gemm, ring, call, claims, role, n0, n1, n2, n3, skip,
           HAS_GEMM: tl.constexpr, HAS_COPY: tl.constexpr, HAS_COPY_ADD: tl.constexpr, HAS_REDUCE: tl.constexpr,
           HAS_GATHER: tl.constexpr, HAS_PUT: tl.constexpr, HAS_ATTN: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
           BK: tl.constexpr, CR: tl.constexpr, CC: tl.constexpr, D: tl.constexpr, BQ: tl.constexpr, BKV: tl.constexpr,
           DATA: tl.constexpr):
    """A block of a fixed role: claim that role's tasks in queue order until none is left, from task
    ``skip`` of the compute queue on (the ones before it ran from the GEMM table). It counts no
    blocked waits (``blocked_bit`` 0, so Triton drops that branch and the ``state`` argument, here
    ``claims``, is never touched)."""
    skip = tl.where(role == 0, skip, 0)
    n_tasks = tl.where(role == 0, n0, tl.where(role == 1, n1, tl.where(role == 2, n2, n3))) - skip
    first = tl.where(role == 0, 0, tl.where(role == 1, n0, tl.where(role == 2, n0 + n1, n0 + n1 + n2))) + skip
    i = tl.atomic_add(claims + role, 1, sem="relaxed", scope="gpu")
    while i < n_tasks:
        _task(tasks + (first + i) * TW, tabs, gemm, ring, call, role, claims, 0,
              HAS_GEMM, HAS_COPY, HAS_COPY_ADD, HAS_REDUCE, HAS_GATHER, HAS_PUT, HAS_ATTN, BM, BN, BK, CR, CC, D, BQ,
              BKV, DATA)
        i = tl.atomic_add(claims + role, 1, sem="relaxed", scope="gpu")


@triton.jit
def _bulk(regions, r0, nreads, DATA: tl.constexpr, MODE: tl.constexpr):
    """Whether a copy or gather task takes the bulk path (HwKnobs.data_path: never, where its lines
    are long enough, or wherever its regions allow one, bulk_copy._suits)."""
    if DATA == DATA_REGISTER:
        return False
    elif DATA == DATA_AUTO:
        return bulk_copy._suits(regions, r0, nreads, bulk._stages(SB), LINE, MODE)
    else:
        return bulk_copy._suits(regions, r0, nreads, bulk._stages(SB), 0, MODE)


@triton.jit
def _boxes(regions, maps, r0, nreads, DATA: tl.constexpr, MODE: tl.constexpr):
    """Whether a copy or reduce task takes 2-D box copies (bulk_tensor._suits: every region boxed,
    its buffer mapped). Measured on one H200 (docs/results/2026-12-03-box-copies.md): box reduces of
    8 are at least the register path at 1, 4, 16 and 32 SMs (+19%, +9%, then +3-4%: within the register
    path's run-to-run spread at 16 SMs) and 2.3x the 1-D bulk reduce, and hold a stage of every source
    in flight per SM (the register path: a few KiB), so boxed reduces take them on ``auto`` and ``bulk``; box copies of tiles beat 1-D copies (365 vs 206) but
    not registers (584), so only ``bulk`` copies strided tiles as boxes (a contiguous pair streams
    faster as 1-D pieces, bulk_tensor._strided)."""
    if DATA == DATA_REGISTER:
        return False
    elif MODE == bulk.COPY:
        if DATA == DATA_BULK:
            return bulk_tensor._suits(regions, maps, r0, nreads, bulk._stages(bulk_tensor.BB), MODE) & \
                bulk_tensor._strided(regions, r0, nreads, MODE)
        else:
            return False
    else:  # a reduce stage holds a box of every source (bulk_reduce._reduce)
        return bulk_tensor._suits(regions, maps, r0, nreads, bulk._stages(nreads * RB), MODE)


@triton.jit
def _copy_step(regions, bases, maps, r0, nreads, timeout_ns, err32, err64, rank, role, task, epoch,
               CR: tl.constexpr, CC: tl.constexpr, DATA: tl.constexpr):
    """writes[i] = reads[i]: box copies, 1-D bulk copies or registers, as the data path says."""
    if _boxes(regions, maps, r0, nreads, DATA, bulk.COPY):
        bulk_tensor._copy(regions, maps, r0, nreads, timeout_ns, err32, err64, rank, role, task, epoch, LAG)
    elif _bulk(regions, r0, nreads, DATA, bulk.COPY):
        bulk_copy._copy(regions, bases, r0, nreads, timeout_ns, err32, err64, rank, role, task, epoch, SB, LAG)
    else:
        _copy(regions, bases, r0, nreads, CR, CC)


@triton.jit
def _copy_add(regions, bases, maps, r0, nreads, timeout_ns, err32, err64, rank, role, task, epoch):
    """writes[0] += reads[0] (an accumulating copy, layout.COPY_ADD: GEMM+RS's push into the owner), a bf16
    reduce-add at the destination, atomic per element, on every data path (a register path would need
    an atomic per element): 2-D boxes where both regions tile into them and are mapped (measured 2.25x
    the 1-D reduce-add at 16 SMs, docs/results/2026-12-03-box-copies.md), else 1-D bulk pieces (the
    plan's 8-column rule makes every region 16-byte aligned); the register path maps no slot, so there
    only 1-D pieces (launch.Addresses). The step ends with ``cp.async.bulk.wait_group 0`` (bulk._close):
    the adds are complete at the destination before the task's signal, a system-scope release to the
    peer (sync._bump)."""
    if bulk_tensor._suits(regions, maps, r0, nreads, bulk._stages(bulk_tensor.BB), bulk.ADD):
        bulk_tensor._accumulate(regions, maps, r0, nreads, timeout_ns, err32, err64, rank, role, task, epoch, LAG)
    else:
        bulk_copy._accumulate(regions, bases, r0, nreads, timeout_ns, err32, err64, rank, role, task, epoch, SB, LAG)


@triton.jit
def _task(row, tabs, gemm, ring, call, role, state, blocked_bit,
          HAS_GEMM: tl.constexpr, HAS_COPY: tl.constexpr, HAS_COPY_ADD: tl.constexpr, HAS_REDUCE: tl.constexpr,
          HAS_GATHER: tl.constexpr, HAS_PUT: tl.constexpr, HAS_ATTN: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
          BK: tl.constexpr, CR: tl.constexpr, CC: tl.constexpr, D: tl.constexpr, BQ: tl.constexpr, BKV: tl.constexpr,
          DATA: tl.constexpr):
    """One task row (layout.Task): wait for its slots, run its op, bump its signals. With a
    ``blocked_bit`` (the adaptive kernel), a wait that has to spin counts itself in the controller
    word while it spins (the policy lends blocked SMs to the other role). ``tabs``, ``gemm``, ``ring``
    and ``call``: the groups fused_kernel builds."""
    regions, waits, signals, aux, bases, maps, flag_bases, locks = tabs
    a_host, a2_host, b_host, a2_buf = gemm
    records, ctl, head, capacity = ring
    rank, epoch, own_flags, timeout_ns, sm_scale, err32, err64 = call
    op = tl.load(row + T_OP)
    nreads = tl.load(row + T_NREADS)
    r0 = tl.load(row + T_R0)
    task = tl.load(row + T_TASK)
    for w in range(tl.load(row + T_W0), tl.load(row + T_W1)):
        slot = tl.load(waits + WW * w + W_SLOT)
        target = (epoch - 1) * tl.load(waits + WW * w + W_BUMPS) + tl.load(waits + WW * w + W_COUNT)
        if blocked_bit != 0:  # the check must be block-uniform: an atomic's result is the same for every thread
            seen = tl.atomic_add(_raw(own_flags + 8 * slot, tl.int64), 0, sem="acquire", scope="sys")
            if seen < target:
                tl.atomic_add(state + CTRL, blocked_bit, sem="relaxed", scope="gpu")
                _wait(own_flags + 8 * slot, target, slot, epoch, task, rank, role, timeout_ns, err32, err64, ctl)
                tl.atomic_add(state + CTRL, -blocked_bit, sem="relaxed", scope="gpu")
        else:
            _wait(own_flags + 8 * slot, target, slot, epoch, task, rank, role, timeout_ns, err32, err64, ctl)
    a0 = tl.load(row + T_A0)
    a1 = tl.load(row + T_A1)
    if HAS_GEMM:
        if op == GEMM:
            _fence_async()
            _gemm(regions, bases, r0, a_host, a2_host, b_host, a2_buf, BM, BN, BK)
    if HAS_COPY_ADD:  # accumulating copies' code only in kernels that have one (layout.COPY_ADD); plain copies'
        if op == COPY:  # only in kernels that have those (the register copy's code spills)
            if tl.load(row + T_ACC) != 0:
                _copy_add(regions, bases, maps, r0, nreads, timeout_ns, err32, err64, rank, role, task, epoch)
            elif HAS_COPY:
                _copy_step(regions, bases, maps, r0, nreads, timeout_ns, err32, err64, rank, role, task, epoch, CR, CC,
                           DATA)
    elif HAS_COPY:
        if op == COPY:
            _copy_step(regions, bases, maps, r0, nreads, timeout_ns, err32, err64, rank, role, task, epoch, CR, CC, DATA)
    if HAS_REDUCE:
        if op == REDUCE:
            if _boxes(regions, maps, r0, nreads, DATA, bulk.ADD):
                bulk_reduce._reduce(regions, bases, maps, r0, nreads, timeout_ns, err32, err64, rank, role, task,
                                    epoch, RB, True)
            elif DATA == DATA_BULK:
                bulk_reduce._reduce(regions, bases, maps, r0, nreads, timeout_ns, err32, err64, rank, role, task,
                                    epoch, RB, False)
            else:
                _reduce(regions, bases, r0, nreads, CR, CC)
    if HAS_GATHER:
        if op == GATHER:
            if _bulk(regions, r0, 1, DATA, bulk.GATHER):
                bulk_copy._gather(regions, bases, aux, r0, a0, a1, timeout_ns, err32, err64, rank, role, task, epoch, SB, LAG)
            else:
                _gather(regions, bases, aux, r0, a0, a1, CR, CC)
    if HAS_PUT:
        if op == PUT:
            tl.debug_barrier()
            for c in range(a0, a1):
                cmd = aux + c * CW
                _push(tl.load(cmd + C_KIND), tl.load(cmd + C_DST), tl.load(cmd + C_FLAG), tl.load(cmd + C_BYTES),
                      tl.load(cmd + C_SRC), tl.load(cmd + C_DSTOFF), epoch, records, ctl, head, capacity, task, rank,
                      timeout_ns, err32, err64)
    if HAS_ATTN:
        if op == ATTN:
            _fence_async()  # its K and V come through TMA (the async proxy); peers wrote them through the generic one
            _attn(regions, bases, locks, aux, r0, a0, a1, tl.load(row + T_LOCK), tl.load(row + T_Q0),
                  tl.load(row + T_K0), tl.load(row + T_MASKED), epoch, task, rank, timeout_ns, err32, err64,
                  sm_scale, D, BQ, BKV)
        if op == NORM:
            _norm(regions, bases, r0, D, BQ)
    s0 = tl.load(row + T_S0)
    s1 = tl.load(row + T_S1)
    if s1 > s0:
        tl.debug_barrier()
        for s in range(s0, s1):
            _bump(flag_bases, tl.load(signals + SW * s + S_RANK), tl.load(signals + SW * s + S_SLOT), rank)


def signature(ops: frozenset[str], head_dim: int = 64, adaptive: bool = False,
              data_path: str = DEFAULTS.data_path) -> tuple[dict, dict]:
    """(signature, constexprs) for compiling without a GPU (CI), for a kernel holding ``ops``."""
    const = constexprs(ops, head_dim, barrier=True, adaptive=adaptive, data_path=data_path)
    types = {"a_host": f"tensordesc<bf16[{const['BM']}, {const['BK']}]>",
             "a2_host": f"tensordesc<bf16[{const['BM']}, {const['BK']}]>",
             "b_host": f"tensordesc<bf16[{const['BK']}, {const['BN']}]>",
             "c_host": f"tensordesc<bf16[{const['BM']}, {const['BN']}]>", "done_ptr": "*i32", "records": "i64",
             "ctl": "i64", "capacity": "i64", "err32": "*i32", "err_host": "i64", "timeout_ns": "i64",
             "barrier_timeout_ns": "i64", "sm_scale": "fp32",
             "ctrl0": "i64", "work": "i64"}
    ints = {"a2_buf", "rank", "world", "gpn", "arrive0", "exit0", "go", "n0", "n1", "n2", "n3", "b0", "b1", "b2", "b3",
            "n_seg", "n_gemm", "min_sms", "hysteresis", "link_sms"}
    sig = {n: types.get(n, "i32" if n in ints else "*i64") for n in fused_kernel.arg_names if n not in const}
    return sig, const


def constexprs(ops: frozenset[str], head_dim: int, barrier: bool, copy_rows: int = DEFAULTS.copy_rows,
               adaptive: bool = False, data_path: str = DEFAULTS.data_path) -> dict:
    """The compile-time switches of the kernel for one op set. ``adaptive``: compute and intra
    blocks follow the controller's shared target (else their roles are fixed). ``copy_rows``: a copy, reduce or
    gather step moves copy_rows x 256 bf16 per SM (:class:`~mkernel.hw.knobs.HwKnobs`); peer loads take
    microseconds to return, so an SM's NVLink rate is about the bytes in flight over that latency.
    ``data_path``: the register or the bulk path for those steps (``DATA``, HwKnobs.data_path)."""
    bm, bn, bk = GEMM_TILE
    return {"BARRIER": barrier, "HAS_GEMM": "gemm" in ops, "HAS_COPY": "copy" in ops, "HAS_COPY_ADD": COPY_ADD in ops,
            "HAS_REDUCE": "reduce" in ops,
            "HAS_GATHER": "gather" in ops, "HAS_PUT": "put" in ops, "HAS_ATTN": "attn" in ops,
            "BM": bm, "BN": bn, "BK": bk, "CR": copy_rows, "CC": 256, "DATA": DATA_PATHS.index(data_path),
            "D": head_dim, "BQ": ATTN_QUERY_ROWS,
            # 64-row key blocks at D = 128: 128-row blocks need 224 KiB of stages and spill twice as much
            # in this kernel (docs/results/2026-12-02-attention-locks.md)
            "BKV": 128 if head_dim <= 64 else 64, "ADAPTIVE": adaptive, "LOG": LOG_ENTRIES}



NUM_WARPS, NUM_STAGES = 8, 3
