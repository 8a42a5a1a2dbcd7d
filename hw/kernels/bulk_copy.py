"""The fused kernel's copy, gather and reduce-add steps as 1-D bulk copies (``cp.async.bulk``): each
line of a region, or each piece of at most one stage of it, is one bulk copy global -> shared ->
global through :mod:`.bulk`'s ring, several stages in flight per SM, each stage's arrival waited on
with an mbarrier; nothing in flight occupies a register.

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
more. Where regions tile into 16 x 256 boxes, 2-D box copies through host-built tensor maps take
over (fused._boxes): reduces on ``auto`` and ``bulk`` (:mod:`.bulk_reduce`'s ``TENSOR`` fill), copies
of strided tiles on ``bulk`` (:mod:`.bulk_tensor`).
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..lowering.layout import Command
from .bulk import (ADD, C, COMMIT, COPY, CW, DATA0, GATHER, R_COL0, R_COLS, R_LD, R_ROW0, R_ROWS, R_SLOT, RW,
                   WAIT_READ, WARP_SYNC, _asm0, _close, _load, _mbar_expect, _open, _short, _stages, _store, _tid,
                   _wait_read, _wait_stage)
from .sync import _bar_sync, _clock

A_ROW = C(int(Command.SOURCE_ROW))  # a gather row's source row
LINE_MIN = 4096  # auto's shortest bulk line: 4 KiB (bench_bulk copy-w1k: register 673 vs bulk 575 GB/s at 16 SMs, copy-w2k: 786 vs 810)


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
