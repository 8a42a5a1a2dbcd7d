"""The bulk path's reduce: ``writes[0] = sum(reads)`` with every source's piece of a stage landed by
bulk loads (:mod:`.bulk`'s ring and mbarriers), summed from shared memory by the whole block in
fp32 and rounded once, as the register path (:func:`tiles._reduce`) does, so the two agree bit for
bit. Its own module because its inner loop is register code (16-byte shared loads, fp32 adds, bf16
packing, 16-byte global stores), not bulk copies; the ring it fills is :mod:`.bulk`'s.

Two ways to fill the ring: 1-D bulk copies of each source's line pieces (207 GB/s for a reduce of
8 at 16 SMs on one H200, against the register path's 463: docs/results/2026-12-03-box-copies.md),
run only when asked for (``HwKnobs.data_path = "bulk"``) on regions that do not tile into boxes;
or (``TENSOR``) one 2-D box copy per source and stage through host-built tensor maps
(:mod:`.bulk_tensor`: 483 GB/s), which ``auto`` and ``bulk`` take wherever the regions tile into
16 x 256 boxes (fused._boxes).
"""
from __future__ import annotations

import triton
import triton.language as tl

from . import bulk_tensor
from .bulk import DATA0, R_LD, RW, _close, _do, _load, _mbar_expect, _open, _short, _stages, _tid, _wait_stage
from .bulk_copy import _geometry, _next, _piece, _where
from .sync import _bar_sync, _clock


@triton.jit
def _lds(addr):
    """Sixteen bytes of shared memory per element of ``addr``, as four 32-bit words."""
    return tl.inline_asm_elementwise("ld.shared.v4.b32 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,r", [addr.to(tl.int32)],
                                     dtype=(tl.int32, tl.int32, tl.int32, tl.int32), is_pure=False, pack=1)


@triton.jit
def _stg(addr, w0, w1, w2, w3, ok):
    _do("{ .reg .pred p; setp.ne.s32 p, $6, 0; @p st.global.v4.b32 [$1], {$2, $3, $4, $5}; mov.u32 $0, 0; }",
        "=r,l,r,r,r,r,r", [addr.to(tl.int64), w0, w1, w2, w3, ok.to(tl.int32)])


@triton.jit
def _lo(word):
    """The fp32 value of a word's low bf16 (exact: bf16 is fp32's top half)."""
    return (word << 16).to(tl.float32, bitcast=True)


@triton.jit
def _hi(word):
    return (word & -65536).to(tl.float32, bitcast=True)


@triton.jit
def _pack(hi, lo):
    """Two fp32 values rounded (to nearest even, as ``.to(tl.bfloat16)``) into one bf16 pair."""
    return tl.inline_asm_elementwise("cvt.rn.bf16x2.f32 $0, $1, $2;", "=r,f,f", [hi, lo], dtype=tl.int32,
                                     is_pure=True, pack=1)


@triton.jit
def _fill_sources(s, lb, c, sm, tid, regions, bases, r0, nreads, n_lines, line_bytes, w, k, RB: tl.constexpr):
    """Issue a reduce's stage load: the same piece of every source, source p at p x RB."""
    line, ok, nl, nb = _piece(lb, c, tid, n_lines, line_bytes, w, k)
    bar = sm + 8 * s
    stage = sm + DATA0 + s * (nreads * RB).to(tl.int32)
    _mbar_expect(bar, nreads.to(tl.int32) * nl * nb, tid == 0)
    for p in range(nreads):
        src, s_stride, _r, _c, _l = _where(regions, bases, r0 + p)
        _load(stage + p * RB + tid * w, src + line * s_stride + c * w, nb, bar, ok)


@triton.jit
def _fill(s, lb, c, sm, tid, regions, bases, maps, r0, nreads, n_lines, line_bytes, w, k, RB: tl.constexpr,
          TENSOR: tl.constexpr):
    """A reduce stage's loads: one box per source by thread 0, or one line piece per thread of warp 0."""
    if TENSOR:
        if tid == 0:
            bulk_tensor._load_sources(s, lb, c, sm, regions, maps, r0, nreads, (nreads * RB).to(tl.int32))
    elif tid < 32:
        _fill_sources(s, lb, c, sm, tid, regions, bases, r0, nreads, n_lines, line_bytes, w, k, RB)


@triton.jit
def _reduce(regions, bases, maps, r0, nreads, timeout_ns, err32, err64, rank, role, task, epoch, RB: tl.constexpr,
            TENSOR: tl.constexpr):
    """writes[0] = sum(reads), summed in fp32 and rounded once, in the register path's order (so the
    two paths agree bit for bit). Every source's piece of a stage lands through bulk loads issued
    by warp 0 (the ring holds ``ns`` stages of nreads x RB bytes); the whole block then sums it
    from shared memory, 16 bytes per element, and stores the bf16 result with 16-byte stores.
    RB // 16 must be at least the block's threads (else elements are replicated across warps and
    stored twice). With ``TENSOR`` (a boxed task, :func:`.bulk_tensor._suits`; RB == BOX_BYTES) a
    piece is one box per source, loaded by thread 0 through the sources' tensor maps (``maps``):
    16 lines of 512 bytes, the layout the 1-D loads give a 256-column region."""
    ns = _stages(nreads * RB)
    _short(ns, nreads * RB, err32, err64, rank, role, task, epoch)
    if ns > 0:
        tid = _tid()
        sm = _open(ns, tid, False)
        start = _clock()
        dst, d_stride, rows, cols, d_ld = _where(regions, bases, r0 + nreads)
        if TENSOR:
            if tid == 0:
                bulk_tensor._fence_sources(regions, maps, r0, nreads)
            tl.static_assert(RB == bulk_tensor.BB)
            n_lines, line_bytes = rows, cols * 2
            w = (cols * 0 + bulk_tensor.BC * 2).to(tl.int32)
            nc = (cols // bulk_tensor.BC).to(tl.int32)
            k = (cols * 0 + bulk_tensor.BR).to(tl.int32)
            n = ((rows // bulk_tensor.BR) * nc).to(tl.int32)
        else:
            whole = cols == d_ld
            for p in range(nreads):
                whole = whole & (tl.load(regions + (r0 + p) * RW + R_LD) == cols)
            n_lines = tl.where(whole, 1, rows)
            line_bytes = tl.where(whole, rows * cols * 2, cols * 2)
            w, nc, k, n = _geometry(n_lines, line_bytes, RB, 32)  # warp 0 issues the loads
        stage_bytes = (nreads * RB).to(tl.int32)
        fs, fph, flb, fc = tid - tid, tid - tid, 0, 0  # the next stage load
        for j in range(tl.minimum(ns, n)):
            _fill(fs, flb, fc, sm, tid, regions, bases, maps, r0, nreads, n_lines, line_bytes, w, k, RB, TENSOR)
            fs, fph, flb, fc = _next(fs, fph, flb, fc, ns, nc)
        e = tl.arange(0, RB // 16)  # one 16-byte chunk (8 bf16) of the stage's piece per element
        in_line = e // (w // 16)
        off = (e % (w // 16)) * 16
        s, ph, lb, c = tid - tid, tid - tid, 0, 0  # the next stage to sum
        for j in range(n):
            _line, _ok, nl, nb = _piece(lb, c, tid, n_lines, line_bytes, w, k)
            _wait_stage(sm + 8 * s, ph, s, start, timeout_ns, err32, err64, rank, role, task, epoch)
            stage = sm + DATA0 + s * stage_bytes
            a0 = tl.zeros([RB // 16], tl.float32)
            a1, a2, a3, a4, a5, a6, a7 = a0, a0, a0, a0, a0, a0, a0
            for p in range(nreads):
                x0, x1, x2, x3 = _lds(stage + p * RB + e * 16)
                a0 += _lo(x0)
                a1 += _hi(x0)
                a2 += _lo(x1)
                a3 += _hi(x1)
                a4 += _lo(x2)
                a5 += _hi(x2)
                a6 += _lo(x3)
                a7 += _hi(x3)
            _bar_sync()  # every thread has read the stage (and waited for its phase): refill it now,
            if j + ns < n:  # so its next loads are in flight while the block adds and stores
                _fill(fs, flb, fc, sm, tid, regions, bases, maps, r0, nreads, n_lines, line_bytes, w, k, RB, TENSOR)
                fs, fph, flb, fc = _next(fs, fph, flb, fc, ns, nc)
            at = dst + (lb * k + in_line).to(tl.int64) * d_stride + c * w + off
            _stg(at, _pack(a1, a0), _pack(a3, a2), _pack(a5, a4), _pack(a7, a6), (in_line < nl) & (off < nb))
            s, ph, lb, c = _next(s, ph, lb, c, ns, nc)
        _close(sm, ns, tid, False)
