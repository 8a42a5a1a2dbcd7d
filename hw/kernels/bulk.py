"""The ring the fused kernel's bulk steps move data through, and the PTX they are built from
(Triton + inline PTX, sm_90): data moves global -> shared -> global through a ring of
shared-memory stages with ``cp.async.bulk``, several stages in flight per SM, each stage's arrival
waited on with an mbarrier; nothing in flight occupies a register.

Why: the register path (:func:`tiles._copy` and friends) holds every byte in flight in registers
until its load returns, so an SM's rate is its registers over the load latency, a few GB/s per SM
over NVLink (docs/results/2026-11-30-nvlink.md). A bulk copy is issued by one thread and completes
on its own; the SM's in-flight bytes are its shared memory.

Why inline PTX, not Triton's tensor descriptors: Triton 3.6 lowers
``tl.make_tensor_descriptor`` + ``.load`` / ``.store`` to 2-D TMA, but every descriptor is built on
the device into the launch's global scratch (128 bytes each, tensormap.replace + a proxy fence, per
region per task), and ``.store`` takes its data from registers (shared -> registers -> shared ->
TMA store, one store in flight); a reduce over a variable number of sources would need a
descriptor per source per tile. A 1-D bulk copy takes a plain address and a byte count (a multiple
of 16): region rows (lines) are copied as they are, no descriptor, no scratch, no register; a 2-D
box copy reads a tensor map the host built once per buffer and address (:mod:`.bulk_tensor`).

The steps: :mod:`.bulk_copy` (copies, gathers and reduce-adds as 1-D bulk copies, one per line piece),
:mod:`.bulk_tensor` (copies and reduce-adds as 2-D box copies through host-built tensor maps) and
:mod:`.bulk_reduce` (a reduce summed from the ring in fp32).

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
from ..lowering.layout import COMMAND_WIDTH, REGION_WIDTH, Region
from .sync import ERR_TIMEOUT, _bar_sync, _clock, _record

C = tl.constexpr
RW, CW = C(REGION_WIDTH), C(COMMAND_WIDTH)
R_SLOT, R_ROW0, R_COL0, R_ROWS, R_COLS, R_LD = (C(int(c)) for c in (Region.SLOT, Region.ROW0, Region.COL0, Region.ROWS,
                                                                  Region.COLS, Region.LD))
MAX_STAGES = C(16)  # mbarriers reserved at the start of shared memory
DATA0 = C(1024)  # first stage byte (the mbarriers before it)
WHAT_STAGE = C(ring.WHAT_BULK_STAGE)  # the error record's ``what`` for a bulk stage (mk_ring.h: mk_what)
COPY, ADD, GATHER = C(0), C(1), C(2)  # what a stage's store does: copy, bf16 reduce-add, copy of indexed rows
STAGE_BYTES = 16384  # a copy stage: 16 KiB (eleven stages in a GEMM kernel's 180 KiB, two in 48 KiB)
REDUCE_BYTES = 8192  # one source's share of a reduce stage: 8 KiB (16 lines of 256 bf16)


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
# the async proxy (bulk copies) sees the mbarriers this thread just initialised (shared) and what it
# read after its waits (peers' generic stores, global)
FENCE_INIT = C("fence.proxy.async.shared::cta; fence.proxy.async.global; mov.u32 $0, 0;")
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
    _asm0(FENCE_INIT)
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
