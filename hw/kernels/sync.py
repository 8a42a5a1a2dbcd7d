"""Device-side synchronisation for the fused kernel (Triton): bounded waits, the error record, the
GPU->host ring producer, the call barriers and the end of a call's epoch.

The protocol (the ring, the waits, the error block) is specified once, in ``csrc/mk_ring.h``; this
is its one device copy: the fused kernel runs it, and so do the self-test kernels
(``hw/measure/ring_kernels.py``, `mkernel selftest`) and the standalone GEMM's wait.
Every layout offset and constant here comes from the header's Python mirror (:mod:`ring`,
:mod:`layout`), which a test checks against the compiled header.

Every wait is bounded by ``%globaltimer`` and gives up early once any block has recorded an error
(``err32[0]``) or the proxy has aborted (the ring's control word); the first error wins and names
rank, role, what (flag or ring slot), index, epoch, seen, expected and the schedule task: the
layout :class:`mkernel.hw.runtime.state.ErrorBlock` reads. Waits are ``ld.acquire.sys`` with a
``nanosleep`` backoff (32 ns doubling to MAX_NAP_NS): without it, a hundred compute blocks polling
flat out slowed the MoE dispatch blocks they waited on by 8-37x. Ring records are committed with
``st.release.sys`` after their body.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..lowering import ring
from ..lowering.layout import ErrorCode, ErrorField

C = tl.constexpr
SIGNAL = C(ring.SIGNAL)
ERR_TIMEOUT, ERR_ABORTED = C(int(ErrorCode.TIMEOUT)), C(int(ErrorCode.ABORTED))
E_RANK, E_ROLE, E_WHAT, E_INDEX, E_EPOCH, E_SEEN, E_EXPECTED, E_TASK = (
    C(int(f)) for f in (ErrorField.RANK, ErrorField.ROLE, ErrorField.WHAT, ErrorField.INDEX, ErrorField.EPOCH,
                        ErrorField.SEEN, ErrorField.EXPECTED, ErrorField.TASK))
ROLE_COMPUTE, ROLE_SEND = C(ring.ROLE_COMPUTE), C(ring.ROLE_SEND)
WHAT_FLAG, WHAT_RING_SLOT = C(ring.WHAT_FLAG), C(ring.WHAT_RING_SLOT)
CHECK_EVERY, ABORT_EVERY = C(ring.WAIT_CHECK_EVERY), C(ring.WAIT_ABORT_EVERY)
CTL_TAIL, CTL_ABORT = C(8 * ring.CTL_TAIL), C(8 * ring.CTL_ABORT)  # byte offsets of the control words
# a record's byte offsets (mk_cmd); _push writes type and dst_rank as one u32, chunk and bytes as one u64
_AT = {name: ring.CMD_DTYPE.fields[name][1] for name in ring.CMD_DTYPE.names}
assert _AT["dst_rank"] == _AT["type"] + 2 and _AT["bytes"] == _AT["chunk"] + 4 and _AT["type"] % 4 == 0, \
    "sync._push packs (type, dst_rank) into one u32 and (chunk, bytes) into one u64"
REC_BYTES = C(ring.CMD_DTYPE.itemsize)
REC_SEQ, REC_TYPE, REC_CHUNK, REC_SRC, REC_DST, REC_EPOCH, REC_TIME = (
    C(_AT[f]) for f in ("seq", "type", "chunk", "src_off", "dst_off", "epoch", "timestamp"))
MAX_NAP_NS = C(512)  # a waiting block sleeps 32, 64, ... up to this many ns between polls
CREDIT_NAP_NS = C(2048)  # a push waiting for ring credit: 128, 256, ... up to this (the proxy frees slots in batches)


@triton.jit
def _asm64(asm: tl.constexpr, constraints: tl.constexpr, args):
    return tl.inline_asm_elementwise(asm, constraints, args, dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _clock():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _block_max(x):
    """The max of every thread's own scalar ``x`` over the block (a block reduction): one value, so a
    branch or loop condition on it is block-uniform. All threads must call it. The tensor has 1024
    elements (a CTA's most threads) so that every thread holds some of it: a smaller one is held by
    the first threads only and copied in the rest (128 elements in the kernel's 8 warps: warps 4-7
    hold copies), and the reduction would then leave those threads' values out."""
    return tl.max(tl.zeros([1024], x.dtype) + x, 0)


@triton.jit
def _clock_uniform():
    """%globaltimer as one value for the whole block, for loop conditions that must not split it."""
    return _block_max(_clock())


@triton.jit
def _block_all(cond):
    """Whether ``cond`` holds in every thread of the block (block-uniform, like :func:`_block_max`)."""
    return _block_max((cond == 0).to(tl.int32)) == 0


@triton.jit
def _ld_acquire(addr):
    return _asm64("ld.acquire.sys.global.u64 $0, [$1];", "=l,l", [addr])


@triton.jit
def _nanosleep(ns):
    tl.inline_asm_elementwise("nanosleep.u32 $1; mov.u32 $0, 0;", "=r,r", [ns], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _fence_sys():
    tl.inline_asm_elementwise("fence.acq_rel.sys; mov.u32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _fence_async():
    tl.inline_asm_elementwise("fence.proxy.async.global; mov.u32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False,
                              pack=1)


@triton.jit
def _st_release32(addr, value):
    tl.inline_asm_elementwise("st.release.sys.global.u32 [$1], $2; mov.u32 $0, 0;", "=r,l,r", [addr, value],
                              dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _st_release64(addr, value):
    tl.inline_asm_elementwise("st.release.sys.global.u64 [$1], $2; mov.u32 $0, 0;", "=r,l,l", [addr, value],
                              dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _bump(flag_bases, target, slot, rank):
    """Add one to ``slot`` of rank ``target``, releasing what this block wrote before it (the
    caller's barrier comes first). Another GPU reads it across the system: a ``fence.acq_rel.sys``
    and a system-scope release; this GPU only: a gpu-scope release is enough and far cheaper."""
    flag = _raw(tl.load(flag_bases + target) + 8 * slot, tl.int64)
    if target == rank:
        tl.atomic_add(flag, 1, sem="release", scope="gpu")
    else:
        _fence_sys()
        tl.atomic_add(flag, 1, sem="release", scope="sys")


@triton.jit
def _bar_sync():
    """``bar.sync 0`` as inline assembly: the block barrier that ``tl.debug_barrier`` emits, in a form
    Triton's software pipeliner accepts inside a loop (it refuses to pipeline a loop that holds a
    ``gpu.barrier``). Every thread of the block must reach it."""
    tl.inline_asm_elementwise("bar.sync 0; mov.u32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _bulk_writes_done():
    """Wait until this thread's bulk asynchronous copies (TMA stores) have written global memory,
    then order them before its later generic accesses: ``cp.async.bulk.wait_group 0`` (not the
    ``.read`` form Triton uses, which only frees the shared memory) and ``fence.proxy.async``.
    Threads that issued none pass at once; the caller's barrier then covers the one that did."""
    tl.inline_asm_elementwise("cp.async.bulk.wait_group 0; fence.proxy.async.global; mov.u32 $0, 0;", "=r", [],
                              dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _bump_masked(flag_bases, target, slot, rank, n):
    """:func:`_bump` by ``n`` with no branch, for loops Triton must flatten (an ``scf.if`` in a loop
    nest stops it): nothing when ``target`` < 0; the fence and the atomics are predicated instead."""
    here = target == rank
    away = (target >= 0) & (target != rank)
    flag = _raw(tl.load(flag_bases + tl.where(away, target, rank)) + 8 * slot, tl.int64)
    tl.inline_asm_elementwise("{ .reg .pred p; setp.ne.s32 p, $1, 0; @p fence.acq_rel.sys; mov.u32 $0, 0; }", "=r,r",
                              [away.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1)
    tl.atomic_add(flag, n, mask=here, sem="release", scope="gpu")
    tl.atomic_add(flag, n, mask=away, sem="release", scope="sys")


@triton.jit
def _release_stores_if(send):
    """:func:`_bulk_writes_done` then :func:`_bar_sync`, both predicated on ``send`` (block-uniform:
    it comes from scalar table loads), for a flattened loop that must not branch: a tile whose
    signal is not due yet passes with no wait and no barrier."""
    tl.inline_asm_elementwise("{ .reg .pred p; setp.ne.s32 p, $1, 0; @p cp.async.bulk.wait_group 0; "
                              "@p fence.proxy.async.global; @p bar.sync 0; mov.u32 $0, 0; }", "=r,r",
                              [send.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _raw(addr, dtype: tl.constexpr):
    """A pointer from an address, for scalar accesses (ring records, flags)."""
    return addr.to(tl.pointer_type(dtype))


@triton.jit
def _cas_zero32(addr, value):
    """Per thread: compare-and-swap the u32 at ``addr`` from 0 to ``value``; returns the old value."""
    return tl.inline_asm_elementwise("atom.global.acq_rel.gpu.cas.b32 $0, [$1], $2, $3;", "=r,l,r,r",
                                     [addr, value - value, value], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _st32(addr, value):
    tl.inline_asm_elementwise("st.global.u32 [$1], $2; mov.u32 $0, 0;", "=r,l,r", [addr, value], dtype=tl.int32,
                              is_pure=False, pack=1)


@triton.jit
def _st64(addr, value):
    tl.inline_asm_elementwise("st.global.u64 [$1], $2; mov.u32 $0, 0;", "=r,l,l", [addr, value], dtype=tl.int32,
                              is_pure=False, pack=1)


@triton.jit
def _record(err32, err64, code, rank, role, what, index, epoch, seen, expected, task):
    """The first error wins; later ones leave it as it is. Per thread and without a barrier: every
    thread that gets here tries the compare-and-swap, and the one that finds the record empty writes
    the rest. Why: a wait's warps leave on their own (one times out, another sees the flag or this
    error first), so code they may or may not all reach must hold no barrier; Triton's scalar
    atomic broadcasts its result through shared memory between two barriers, and warps that took
    different exits then met at different barriers and ran on out of step."""
    a32 = err32.to(tl.int64)
    a64 = err64.to(tl.int64)
    zero = a32 - a32  # a runtime int64, so constant arguments become values the asm can take
    if _cas_zero32(a32, (zero + code).to(tl.int32)) == 0:
        _st32(a32 + E_RANK, (zero + rank).to(tl.int32))
        _st32(a32 + E_ROLE, (zero + role).to(tl.int32))
        _st32(a32 + E_WHAT, (zero + what).to(tl.int32))
        _st64(a64 + E_INDEX, zero + index)
        _st64(a64 + E_EPOCH, zero + epoch)
        _st64(a64 + E_SEEN, zero + seen)
        _st64(a64 + E_EXPECTED, zero + expected)
        _st64(a64 + E_TASK, zero + task)


@triton.jit
def _wait(addr, target, index, epoch, task, rank, role, timeout_ns, err32, err64, ctl):
    """Spin until the u64 at ``addr`` reaches ``target``: bounded, and abandoned once anyone failed."""
    v = _ld_acquire(addr)
    if v < target:
        start = _clock()
        it = 0
        nap = 32
        going = True
        while going & (v < target):
            _nanosleep(nap)  # back off: blocks spinning flat out starve the blocks they wait for
            nap = tl.minimum(nap * 2, MAX_NAP_NS)
            v = _ld_acquire(addr)
            it += 1
            if (it % CHECK_EVERY) == 0:
                if tl.load(err32, volatile=True) != 0:
                    going = False
                elif (ctl != 0) & ((it % ABORT_EVERY) == 0):
                    if _ld_acquire(ctl + CTL_ABORT) != 0:
                        _record(err32, err64, ERR_ABORTED, rank, role, WHAT_FLAG, index, epoch, v, target, task)
                        going = False
                if going & (_clock() - start > timeout_ns):
                    _record(err32, err64, ERR_TIMEOUT, rank, role, WHAT_FLAG, index, epoch, v, target, task)
                    going = False


@triton.jit
def _poll_lock(lock_at):
    """0 in the one thread that took the tail poller's lock (thread 0 of a block tries; it releases the
    lock itself), 1 elsewhere."""
    return _asm64("{ .reg .pred p; .reg .b32 t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; mov.u64 $0, 1; "
                  "@p atom.global.acquire.gpu.cas.b64 $0, [$1], 0, 1; }", "=l,l", [lock_at])


@triton.jit
def _push(kind, dst_rank, flag, nbytes, src_off, dst_off, epoch, records, ctl, head, capacity, task, rank, timeout_ns,
          err32, err64):
    """One command into the GPU->host ring (mk_ring.h): claim a slot, wait for its credit, write the
    body, commit its seq word.

    ``head`` is three device words: [0] the slots claimed, [1] the last tail seen, [2] the poller lock. The
    proxy's tail lives in pinned host memory, and blocks polling it over PCIe slow every driver call the
    proxy makes (2026-12-05, proxy_probe.py: 64 pollers took each call from 2.6 us to 1.8 ms, 3.8k commands/s).
    So a push waiting for credit polls the device copy, and one elected block at a time reads the host
    tail (and the abort word) and raises the copy, backing off as a flag wait does."""
    slot = tl.atomic_add(head, 1, sem="relaxed", scope="gpu")
    seen_at, lock_at = (head + 1).to(tl.int64, bitcast=True), (head + 2).to(tl.int64, bitcast=True)
    # acquire: pairs with the elected reader's release of the copy, after its acquire of the host tail, which
    # the proxy releases after copying the slot's old record out: so the slot is written only once read
    tail = _asm64("ld.acquire.gpu.global.u64 $0, [$1];", "=l,l", [seen_at])
    if slot - tail >= capacity:
        start = _clock()
        it = 0
        nap = 128
        going = True
        while going & (slot - tail >= capacity):
            # thread-level atomics in inline asm: Triton's scalar atomics put a block barrier in the loop,
            # which warps leaving it at different turns would meet apart
            if _poll_lock(lock_at) == 0:  # this block's thread 0 is elected: the one PCIe reader
                seen = _ld_acquire(ctl + CTL_TAIL)
                aborted = _ld_acquire(ctl + CTL_ABORT) != 0
                _asm64("atom.global.release.gpu.max.s64 $0, [$1], $2;", "=l,l,l", [seen_at, seen])
                _asm64("atom.global.release.gpu.exch.b64 $0, [$1], 0;", "=l,l", [lock_at])
                tail = tl.maximum(tail, seen)
                if aborted & (slot - tail >= capacity):
                    _record(err32, err64, ERR_ABORTED, rank, ROLE_SEND, WHAT_RING_SLOT, slot, epoch, tail,
                            slot - capacity + 1, task)
                    going = False
            if going & (slot - tail >= capacity):
                _nanosleep(nap)
                nap = tl.minimum(nap * 2, CREDIT_NAP_NS)
                tail = tl.maximum(tail, _asm64("ld.acquire.gpu.global.u64 $0, [$1];", "=l,l", [seen_at]))
                it += 1
                if (it % CHECK_EVERY) == 0:  # nested, not `&`: Triton evaluates both sides of `&`
                    if tl.load(err32, volatile=True) != 0:
                        going = False  # someone failed first (recorded there): a push after it must not wait its own timeout
                if going & (_clock() - start > timeout_ns):
                    _record(err32, err64, ERR_TIMEOUT, rank, ROLE_SEND, WHAT_RING_SLOT, slot, epoch, tail,
                            slot - capacity + 1, task)
                    going = False
    # warps may have left the credit wait on different paths (credit, abort, timeout): write and
    # commit only if every thread saw its credit, so the barrier below is reached by all or none
    if _block_all(slot - tail < capacity):
        rec = records + (slot % capacity) * REC_BYTES
        tl.store(_raw(rec, tl.int32) + REC_TYPE // 4, (kind | (dst_rank << 16)).to(tl.int32))
        tl.store(_raw(rec + REC_CHUNK, tl.int64), flag | (nbytes << 32))
        tl.store(_raw(rec + REC_SRC, tl.int64), src_off)
        tl.store(_raw(rec + REC_DST, tl.int64), dst_off)
        tl.store(_raw(rec + REC_EPOCH, tl.int64), epoch)
        tl.store(_raw(rec + REC_TIME, tl.int64), _clock())
        tl.debug_barrier()
        _st_release32(rec + REC_SEQ, (slot + 1).to(tl.int32))


@triton.jit
def _go_bound(barrier_timeout_ns, timeout_ns):
    """The bound of a wait for the call barrier's go flag: twice block 0's (``barrier_timeout_ns``
    per peer) plus one push's, so that block 0's error, which names the missing peer, is recorded
    first. In 64 bits: Triton passes an integer argument below 2^31 as int32, and with 2 s bounds
    the sum wrapped to 1.7 s, so the go waiters timed out before block 0 (2026-12-05)."""
    return 2 * barrier_timeout_ns.to(tl.int64) + timeout_ns


@triton.jit
def _last_block(done_ptr, n_blocks):
    """Whether this block is the last of the call's ``n_blocks`` to finish: a block barrier (every
    thread of it is done), then one acq_rel count. The last block then resets what the call counted
    and stores the epoch for the next launch (read as stored + 1), so no flag or counter is zeroed by
    the host and a call can be replayed from a CUDA graph."""
    tl.debug_barrier()
    return tl.atomic_add(done_ptr, 1, sem="acq_rel", scope="gpu") == n_blocks - 1


@triton.jit
def _tell_peers(first_slot, flag_bases, epoch, rank, world, gpn, records, ctl, head, capacity, timeout_ns, err32,
                err64, NETWORK: tl.constexpr):
    """Set flag ``first_slot + rank`` to the epoch on every peer: a peer store in the node, a ring
    SIGNAL to other nodes."""
    for p in range(world):
        if p != rank:
            if p // gpn == rank // gpn:
                _st_release64(tl.load(flag_bases + p) + 8 * (first_slot + rank), epoch)
            elif NETWORK:
                _push(SIGNAL, p, first_slot + rank, 0, 0, 0, epoch, records, ctl, head, capacity, -1, rank,
                      timeout_ns, err32, err64)


@triton.jit(do_not_specialize=("rank",))  # one binary for every rank (hw/kernels/fused.py, PER_RANK_ARGS)
def enter_kernel(flag_bases, epoch_ptr, rank, world, exit0, timeout_ns, err32, err64, ctl):
    """Before a call stages inputs into the heap: wait until every peer finished the previous call,
    so nothing a peer may still read is overwritten."""
    done = tl.load(epoch_ptr, volatile=True)  # the previous call's epoch
    own = tl.load(flag_bases + rank)
    for p in range(world):
        if p != rank:
            _wait(own + 8 * (exit0 + p), done, exit0 + p, done + 1, -1, rank, ROLE_COMPUTE, timeout_ns, err32, err64, ctl)
