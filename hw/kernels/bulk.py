"""The fused kernel's copy, reduce, gather and reduce-add steps on Hopper's bulk asynchronous
copies (Triton + inline PTX, sm_90): data moves global -> shared -> global through a ring of
shared-memory stages with ``cp.async.bulk``, several stages in flight per SM, each stage's arrival
waited on with an mbarrier; nothing in flight occupies a register.

Why: the register path (:func:`tiles._copy` and friends) holds every byte in flight in registers
until its load returns, so an SM's rate is its registers over the load latency, a few GB/s per SM
over NVLink (docs/results/2026-11-30-nvlink.md). A bulk copy is issued by one thread and completes
on its own; the SM's in-flight bytes are its shared memory.

Why 1-D bulk copies and inline PTX, not Triton's tensor descriptors: Triton 3.6 lowers
``tl.make_tensor_descriptor`` + ``.load`` / ``.store`` to 2-D TMA, but every descriptor is built on
the device into the launch's global scratch (128 bytes each, tensormap.replace + a proxy fence, per
region per task), and ``.store`` takes its data from registers (shared -> registers -> shared ->
TMA store, one store in flight); a reduce over a variable number of sources would need a
descriptor per source per tile. A 1-D bulk copy takes a plain address and a byte count (a multiple
of 16): region rows (lines) are copied as they are, no descriptor, no scratch, no register.

Which lines: a region is ``rows`` lines of ``cols`` x 2 bytes at its buffer's row stride, or one
line when its rows are contiguous (``cols == ld`` on both sides). A line is cut into pieces of at
most one stage; a stage holds ``k`` pieces of one width ``W``, piece ``t`` loaded and stored by
thread ``t``, thread 0 arriving on the stage's mbarrier with the stage's byte count. Copies,
gathers and reduce-adds run in warp 0 alone (up to 32 bulk copies per stage, issued in parallel;
the other warps wait at the step's closing barrier), so the loop's scalar work is done once, not
once per warp. A reduce (:mod:`.bulk_reduce`) sums each stage's sources from shared memory in
fp32 with the whole block (registers hold one 16-byte chunk per source, not the bytes in flight).

Where the fused kernel uses them (``HwKnobs.data_path``, :func:`_suits`): one bulk copy costs about
30 ns to issue on an H200 whatever its size, and the SM's copies are issued one after another, so a
64 KiB tile of 512-byte lines (256 copies) takes ~10 us where the register path takes ~1.4 us, while
16 KiB pieces of contiguous rows stream at ~93 GB/s per SM, above the register path's ~73
(docs/results/2026-12-03-bulk-lag.md). ``auto`` takes the bulk path for lines of LINE_MIN bytes or
more.

Cost per step: two block barriers, ``ns`` mbarrier inits and invalidations, and the drain: the last
stores must be complete before the caller's signal (``cp.async.bulk.wait_group 0``).

Shared memory: the steps use the block's whole dynamic shared memory, ``global_smem[0 :
%dynamic_smem_size)`` (mbarriers in the first ``DATA0`` bytes, then the stages), and size their ring
to it at run time, so a kernel with more shared memory gets more stages. This overlays Triton's own
allocation: correct because no Triton shared buffer is live across a step (in ``fused._task`` each
buffer lives inside one op's code: the GEMM's pipeline, a reduction's scratch), and every step
starts and ends with a block barrier. Nor may a loop that holds a step be software-pipelined:
Triton pipelines an ``scf.for`` whose body has a ``tl.dot`` by issuing the next iterations'
``cp.async`` loads into shared memory before this one ends, so they would land in the ring
(``fused._task``'s loop is a ``while``, which Triton does not pipeline; a ``for`` needs
``tl.range(..., num_stages=1)``). The kernel must use some Triton shared memory, or PTX has no
``global_smem`` (ptxas: "Unknown symbol 'global_smem'"): every fused kernel does (its GEMM or
attention tiles, :func:`sync._block_max`); others call :func:`_declare_smem`.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..lowering import ring
from ..lowering.layout import COMMAND_WIDTH, REGION_WIDTH, Command, Region
from .sync import ERR_TIMEOUT, _bar_sync, _clock, _record

C = tl.constexpr
RW, CW = C(REGION_WIDTH), C(COMMAND_WIDTH)
R_SLOT, R_ROW0, R_COL0, R_ROWS, R_COLS, R_LD = (C(int(c)) for c in (Region.SLOT, Region.ROW0, Region.COL0, Region.ROWS,
                                                                  Region.COLS, Region.LD))
A_ROW = C(int(Command.SOURCE_ROW))  # a gather row's source row
MAX_STAGES = C(16)  # mbarriers reserved at the start of shared memory
DATA0 = C(1024)  # first stage byte (the mbarriers before it)
WHAT_STAGE = C(ring.WHAT_BULK_STAGE)  # the error record's ``what`` for a bulk stage (mk_ring.h: mk_what)
COPY, ADD, GATHER = C(0), C(1), C(2)  # what a stage's store does: copy, bf16 reduce-add, copy of indexed rows
STAGE_BYTES = 16384  # a copy stage: 16 KiB (eleven stages in a GEMM kernel's 180 KiB, two in 48 KiB)
REDUCE_BYTES = 8192  # one source's share of a reduce stage: 8 KiB (16 lines of 256 bf16)
LINE_MIN = 4096  # auto's shortest bulk line: 4 KiB (bench_bulk copy-w1k: register 673 vs bulk 575 GB/s at 16 SMs, copy-w2k: 786 vs 810)


@triton.jit
def _do(asm: tl.constexpr, constraints: tl.constexpr, args):
    """An asm statement run for its effect (Triton's inline asm needs an output: a dummy 0)."""
    return tl.inline_asm_elementwise(asm, constraints, args, dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _reg(asm: tl.constexpr):
    return tl.inline_asm_elementwise(asm, "=r", [], dtype=tl.int32, is_pure=True, pack=1)


@triton.jit
def _tid():
    return _reg("mov.u32 $0, %tid.x;")


@triton.jit
def _nthreads():
    return _reg("mov.u32 $0, %ntid.x;")


@triton.jit
def _smem():
    """The shared-window address of the block's dynamic shared memory."""
    return _reg("mov.u32 $0, global_smem;")


@triton.jit
def _declare_smem(out):
    """For a kernel that uses no Triton shared memory of its own: a block reduction under a branch
    that is never taken, so that Triton declares ``global_smem``. The predicate is an opaque zero
    (an asm statement Triton cannot fold): a predicate made of the kernel's arguments folds away
    when Triton specialises an argument equal to 1 as a constant, and so does the declaration."""
    if _do("mov.u32 $0, 0;", "=r", []) != 0:
        tl.store(out, tl.max(tl.zeros([1024], tl.int64) + tl.program_id(0), 0))


@triton.jit
def _smem_bytes():
    return _reg("mov.u32 $0, %dynamic_smem_size;")


@triton.jit
def _mbar_init(bar, ok):
    _do("{ .reg .pred p; setp.ne.s32 p, $1, 0; @p mbarrier.init.shared::cta.b64 [$2], 1; mov.u32 $0, 0; }",
        "=r,r,r", [ok.to(tl.int32), bar.to(tl.int32)])


@triton.jit
def _mbar_inval(bar, ok):
    _do("{ .reg .pred p; setp.ne.s32 p, $1, 0; @p mbarrier.inval.shared::cta.b64 [$2]; mov.u32 $0, 0; }",
        "=r,r,r", [ok.to(tl.int32), bar.to(tl.int32)])


@triton.jit
def _mbar_expect(bar, nbytes, ok):
    """Arrive on ``bar`` (its one expected arrival) and add ``nbytes`` to the bytes it waits for."""
    _do("{ .reg .pred p; .reg .b64 s; setp.ne.s32 p, $1, 0; "
        "@p mbarrier.arrive.expect_tx.shared::cta.b64 s, [$2], $3; mov.u32 $0, 0; }",
        "=r,r,r,r", [ok.to(tl.int32), bar.to(tl.int32), nbytes.to(tl.int32)])


@triton.jit
def _mbar_done(bar, parity):
    """1 once the phase of parity ``parity`` of ``bar`` has completed (its bytes have landed)."""
    return tl.inline_asm_elementwise("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2; "
                                     "selp.u32 $0, 1, 0, p; }", "=r,r,r", [bar.to(tl.int32), parity.to(tl.int32)],
                                     dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _load(dst, src, nbytes, bar, ok):
    """Global -> shared, ``nbytes`` (a multiple of 16, both ends 16-byte aligned), completing on ``bar``."""
    _do("{ .reg .pred p; setp.ne.s32 p, $1, 0; "
        "@p cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [$2], [$3], $4, [$5]; "
        "mov.u32 $0, 0; }", "=r,r,r,l,r,r",
        [ok.to(tl.int32), dst.to(tl.int32), src.to(tl.int64), nbytes.to(tl.int32), bar.to(tl.int32)])


@triton.jit
def _store(dst, src, nbytes, ok, MODE: tl.constexpr):
    """Shared -> global (COPY, GATHER) or shared +-> global as bf16 adds at the destination (ADD),
    into this thread's current bulk group."""
    if MODE == ADD:
        _do("{ .reg .pred p; setp.ne.s32 p, $1, 0; "
            "@p cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.bf16 [$2], [$3], $4; mov.u32 $0, 0; }",
            "=r,r,l,r,r", [ok.to(tl.int32), dst.to(tl.int64), src.to(tl.int32), nbytes.to(tl.int32)])
    else:
        _do("{ .reg .pred p; setp.ne.s32 p, $1, 0; "
            "@p cp.async.bulk.global.shared::cta.bulk_group [$2], [$3], $4; mov.u32 $0, 0; }",
            "=r,r,l,r,r", [ok.to(tl.int32), dst.to(tl.int64), src.to(tl.int32), nbytes.to(tl.int32)])


@triton.jit
def _asm0(asm: tl.constexpr):
    """A statement with no operands (see the constants below)."""
    _do(asm, "=r", [])


COMMIT = C("cp.async.bulk.commit_group; mov.u32 $0, 0;")
# this thread's bulk stores, all but its newest 0 ... 4 groups, have read their stages
WAIT_READ = C("cp.async.bulk.wait_group.read 0; mov.u32 $0, 0;")
WAIT_READ1 = C("cp.async.bulk.wait_group.read 1; mov.u32 $0, 0;")
WAIT_READ2 = C("cp.async.bulk.wait_group.read 2; mov.u32 $0, 0;")
WAIT_READ3 = C("cp.async.bulk.wait_group.read 3; mov.u32 $0, 0;")
WAIT_READ4 = C("cp.async.bulk.wait_group.read 4; mov.u32 $0, 0;")
MAX_LAG = 4  # the most store groups a refill may leave in flight (the wait's immediate)
LAG = 2  # the default: refill a stage two stores after its own (tools/bench/bench_bulk.py --lag)
# this thread's bulk stores are complete, then ordered before its later generic accesses (the signal)
WAIT_WRITTEN = C("cp.async.bulk.wait_group 0; fence.proxy.async.global; mov.u32 $0, 0;")
# what this thread read after its waits (peers' generic stores) is visible to its bulk loads
FENCE_ASYNC = C("fence.proxy.async.global; mov.u32 $0, 0;")
WARP_SYNC = C("bar.warp.sync -1; mov.u32 $0, 0;")


@triton.jit
def _wait_read(lag):
    """``cp.async.bulk.wait_group.read lag`` (the count is an immediate; ``lag`` <= MAX_LAG,
    uniform across the warp)."""
    if lag == 0:
        _asm0(WAIT_READ)
    elif lag == 1:
        _asm0(WAIT_READ1)
    elif lag == 2:
        _asm0(WAIT_READ2)
    elif lag == 3:
        _asm0(WAIT_READ3)
    else:
        _asm0(WAIT_READ4)


@triton.jit
def _open(ns, tid, WARP: tl.constexpr):
    """Start a step: every warp is done with Triton's shared memory (block barrier), then thread 0
    makes ``ns`` fresh mbarriers, visible to the threads that use them (warp 0 or the block)."""
    _bar_sync()
    sm = _smem()
    for s in range(ns):
        _mbar_init(sm + 8 * s, tid == 0)
    _asm0(FENCE_ASYNC)
    if WARP:
        _asm0(WARP_SYNC)
    else:
        _bar_sync()
    return sm


@triton.jit
def _close(sm, ns, tid, WARP: tl.constexpr):
    """End a step: this thread's bulk stores are written, the mbarriers are gone, and the block
    leaves together (Triton may reuse the memory right after)."""
    _asm0(WAIT_WRITTEN)
    if WARP:
        _asm0(WARP_SYNC)
    else:
        _bar_sync()
    for s in range(ns):
        _mbar_inval(sm + 8 * s, tid == 0)
    _bar_sync()


def stages(smem: int, stage_bytes: int) -> int:
    """Host side of :func:`_stages`: the ring's stages in ``smem`` bytes of dynamic shared memory."""
    return min((smem - int(DATA0)) // stage_bytes, int(MAX_STAGES))


@triton.jit
def _stages(stage_bytes):
    """Stages that fit the block's dynamic shared memory (0: not even one)."""
    return tl.minimum((_smem_bytes() - DATA0) // stage_bytes, MAX_STAGES)


@triton.jit
def _short(ns, need, err32, err64, rank, role, task, epoch):
    """Record that the block's shared memory holds no stage (the launch gave it too little)."""
    if ns < 1:
        _record(err32, err64, ERR_TIMEOUT, rank, role, WHAT_STAGE, -1, epoch, _smem_bytes(), need + DATA0, task)


@triton.jit
def _wait_stage(bar, parity, s, start, timeout_ns, err32, err64, rank, role, task, epoch):
    """Wait for stage ``s``'s bytes, bounded by the step's deadline and abandoned once any block
    has recorded an error (so a failed call ends after one timeout, not one per stage). No barrier
    inside: each thread leaves on its own."""
    done = _mbar_done(bar, parity)
    it = 0
    while (done == 0) & (_clock() - start < timeout_ns):
        done = _mbar_done(bar, parity)  # try_wait suspends the thread for a while before it says no
        it += 1
        if (it % 64) == 0:
            if tl.load(err32, volatile=True) != 0:
                start = start - timeout_ns  # give up
    if done == 0:
        _record(err32, err64, ERR_TIMEOUT, rank, role, WHAT_STAGE, s, epoch, parity, parity ^ 1, task)


@triton.jit
def _where(regions, bases, i):
    """Region row ``i``: the byte address of its first element, its row stride in bytes, rows,
    cols, and the leading dimension in elements."""
    row = regions + i * RW
    ld = tl.load(row + R_LD)
    addr = tl.load(bases + tl.load(row + R_SLOT)) + (tl.load(row + R_ROW0) * ld + tl.load(row + R_COL0)) * 2
    return addr, ld * 2, tl.load(row + R_ROWS), tl.load(row + R_COLS), ld


@triton.jit
def _lines(rows, cols, s_ld, d_ld):
    """(lines, bytes per line) of a region pair: one line when both sides' rows are contiguous."""
    whole = (cols == s_ld) & (cols == d_ld)
    return tl.where(whole, 1, rows), tl.where(whole, rows * cols * 2, cols * 2)


@triton.jit
def _suits(regions, r0, nreads, ns, LINE: tl.constexpr, MODE: tl.constexpr):
    """Whether a copy or gather task may take the bulk path: the ring holds a stage (``ns``), every
    region pair is 16-byte aligned (col0, cols and ld multiples of 8 bf16: a bulk copy's address
    and size must be), and its lines are at least ``LINE`` bytes. Block-uniform (table loads only)."""
    ok = ns > 0
    for p in range(nreads):
        src = regions + (r0 + p) * RW
        dst = regions + (r0 + nreads + tl.where(MODE == COPY, p, 0)) * RW
        s_ld, d_ld = tl.load(src + R_LD), tl.load(dst + R_LD)
        if MODE == GATHER:  # a gather's lines are the written rows
            cols = tl.load(dst + R_COLS)
            line_bytes = cols * 2
        else:
            cols = tl.load(src + R_COLS)
            line_bytes = _lines(tl.load(src + R_ROWS), cols, s_ld, d_ld)[1]
        odd = cols | s_ld | d_ld | tl.load(src + R_COL0) | tl.load(dst + R_COL0)
        ok = ok & ((odd & 7) == 0) & (line_bytes >= LINE)
    return ok


@triton.jit
def _geometry(n_lines, line_bytes, unit, nth):
    """How a region's lines fill stages of ``unit`` bytes: piece width, pieces per line, lines per
    stage (one thread each), and the region's stage loads."""
    w = tl.maximum(tl.minimum(line_bytes, unit), 16).to(tl.int32)
    nc = tl.cdiv(line_bytes, w).to(tl.int32)
    k = tl.minimum(unit // w, nth)
    return w, nc, k, (tl.cdiv(n_lines, k) * nc).to(tl.int32)


@triton.jit
def _next(s, ph, lb, c, ns, nc):
    """The stage load after (stage s, phase parity ph, line block lb, piece c): the ring and the
    region are walked in order, so no division is needed in the loop."""
    c1 = c + 1
    s1 = s + 1
    return tl.where(s1 == ns, 0, s1), tl.where(s1 == ns, ph ^ 1, ph), tl.where(c1 == nc, lb + 1, lb), \
        tl.where(c1 == nc, 0, c1)


@triton.jit
def _piece(lb, c, tid, n_lines, line_bytes, w, k):
    """A stage load's lines (this thread's line, whether it has one, the stage's lines) and bytes
    per line piece."""
    nl = tl.minimum(k, n_lines - lb * k).to(tl.int32)
    nb = tl.minimum(w, line_bytes - c.to(tl.int64) * w).to(tl.int32)
    return (lb * k + tid).to(tl.int64), tid < nl, nl, nb


@triton.jit
def _fill(s, lb, c, sm, tid, src, s_stride, n_lines, line_bytes, w, k, aux, a0, MODE: tl.constexpr,
          SB: tl.constexpr):
    """Issue a stage load: each of its lines by its own thread, thread 0 arriving with the bytes."""
    line, ok, nl, nb = _piece(lb, c, tid, n_lines, line_bytes, w, k)
    bar = sm + 8 * s
    _mbar_expect(bar, nl * nb, tid == 0)
    row = line
    if MODE == GATHER:
        row = tl.load(aux + (a0 + line) * CW + A_ROW, mask=ok, other=0)
    _load(sm + DATA0 + s * SB + tid * w, src + row * s_stride + c * w, nb, bar, ok)


@triton.jit
def _pipe(src, s_stride, dst, d_stride, n_lines, line_bytes, aux, a0, s0, ph0, ns, sm, tid, ctx, MODE: tl.constexpr,
          SB: tl.constexpr, LAG: tl.constexpr):
    """Move one region pair through the ring, in warp 0: each stage, once landed, is stored by the
    threads that loaded it, and refilled with its next load once its stores have read it.

    Stores stay in flight: a stage is refilled ``lag`` = min(LAG, ns - 1) stages after its store was
    issued (``wait_group.read lag``: all but this thread's newest ``lag`` stores have read their
    stages), so up to ``lag + 1`` stores and ``ns - 1 - lag`` loads are in flight at once. With lag 0
    each store's read of shared memory (about 0.5 us for 16 KiB) would stall the next refill. The
    per-thread wait is enough within a region: thread t refills only the piece its own store read.
    One warp barrier per stage: a thread with no piece in a stage could otherwise fall two mbarrier
    phases behind and wait for a phase that never comes. Returns the ring position after it (the
    next region's stage and phase parity)."""
    w, nc, k, n = _geometry(n_lines, line_bytes, SB, 32)
    lag = tl.minimum(LAG, ns - 1)
    fs, fph, flb, fc = s0, ph0, 0, 0  # the next stage load
    for j in range(tl.minimum(ns, n)):
        _fill(fs, flb, fc, sm, tid, src, s_stride, n_lines, line_bytes, w, k, aux, a0, MODE, SB)
        fs, fph, flb, fc = _next(fs, fph, flb, fc, ns, nc)
    s, ph, lb, c = s0, ph0, 0, 0  # the next stage store
    for j in range(n):
        q = j - 1 - lag  # the store whose stage is refilled now
        if (q >= 0) & (q + ns < n):
            _wait_read(lag)  # this thread's store of stage q has read it
            _asm0(WARP_SYNC)  # so has every thread's, and every thread has waited for its phase
            _fill(fs, flb, fc, sm, tid, src, s_stride, n_lines, line_bytes, w, k, aux, a0, MODE, SB)
            fs, fph, flb, fc = _next(fs, fph, flb, fc, ns, nc)
        line, ok, nl, nb = _piece(lb, c, tid, n_lines, line_bytes, w, k)
        _wait_stage(sm + 8 * s, ph, s, *ctx)
        _store(dst + line * d_stride + c * w, sm + DATA0 + s * SB + tid * w, nb, ok, MODE)
        _asm0(COMMIT)
        s, ph, lb, c = _next(s, ph, lb, c, ns, nc)
    _asm0(WAIT_READ)
    _asm0(WARP_SYNC)  # the next region's pieces have other widths: every store has read its stage first
    return s, ph


@triton.jit
def _steps(regions, bases, aux, r0, nreads, a0, a1, timeout_ns, err32, err64, rank, role, task, epoch,
           MODE: tl.constexpr, SB: tl.constexpr, LAG: tl.constexpr):
    """Copy, reduce-add or gather: each of the task's region pairs through the ring in turn, in
    warp 0 (the other warps wait at the closing barrier)."""
    ns = _stages(SB)
    _short(ns, SB, err32, err64, rank, role, task, epoch)
    if ns > 0:
        tid = _tid()
        sm = _open(ns, tid, True)
        if tid < 32:
            ctx = (_clock(), timeout_ns, err32, err64, rank, role, task, epoch)
            s, ph = tid - tid, tid - tid
            for p in range(nreads):
                src, s_stride, rows, cols, s_ld = _where(regions, bases, r0 + p)
                # writes[p] for a copy, writes[0] for a reduce-add or a gather (one read)
                dst, d_stride, _r, d_cols, d_ld = _where(regions, bases, r0 + nreads + tl.where(MODE == COPY, p, 0))
                n_lines, line_bytes = _lines(rows, cols, s_ld, d_ld)
                if MODE == GATHER:
                    n_lines, line_bytes = a1 - a0, d_cols * 2
                s, ph = _pipe(src, s_stride, dst, d_stride, n_lines, line_bytes, aux, a0, s, ph, ns, sm, tid, ctx, MODE,
                              SB, LAG)
            _close(sm, ns, tid, True)
        else:
            _bar_sync()


@triton.jit
def _copy(regions, bases, r0, nreads, timeout_ns, err32, err64, rank, role, task, epoch, SB: tl.constexpr,
          LAG: tl.constexpr):
    """writes[i] = reads[i], pairwise (peer loads or stores where a region is another rank's)."""
    _steps(regions, bases, regions, r0, nreads, 0, 0, timeout_ns, err32, err64, rank, role, task, epoch, COPY, SB, LAG)


@triton.jit
def _accumulate(regions, bases, r0, nreads, timeout_ns, err32, err64, rank, role, task, epoch, SB: tl.constexpr,
                LAG: tl.constexpr):
    """writes[0] += reads[0] + ... + reads[n-1], each added in bf16 at the destination
    (``cp.reduce.async.bulk .add``: the memory that holds writes[0] does the adds, atomically per
    element, so several ranks may add into one owner's tile at once). For accumulate-into-owner
    steps; one bf16 rounding per add, where :func:`_reduce` rounds once."""
    _steps(regions, bases, regions, r0, nreads, 0, 0, timeout_ns, err32, err64, rank, role, task, epoch, ADD, SB, LAG)


@triton.jit
def _gather(regions, bases, aux, r0, a0, a1, timeout_ns, err32, err64, rank, role, task, epoch, SB: tl.constexpr,
            LAG: tl.constexpr):
    """Row i of writes[0] = row aux[a0 + i] of reads[0]: one line per row."""
    _steps(regions, bases, aux, r0, 1, a0, a1, timeout_ns, err32, err64, rank, role, task, epoch, GATHER, SB, LAG)
