"""The bulk path's copies and reduce-adds as 2-D tensor copies: one ``cp.async.bulk.tensor.2d``
moves a whole 16 x 256 box (8 KiB) of a region between global and shared memory, through a TMA
tensor map the host built for the region's buffer (:mod:`mkernel.hw.runtime.tensormap`).

Why: a 1-D bulk copy moves one line, and the SM issues its bulk copies one after another at about
30 ns each whatever their size (docs/results/2026-12-03-bulk-lag.md), so a 128 x 256 tile of
512-byte lines is 256 issues (128 loads, 128 stores): ~8 us of a 9.7 us task on one SM. As boxes
it is 16 issues, and measured it takes ~5 us (bench_bulk copy-tile at 1 SM: 26 GB/s as boxes, 14 as
1-D copies; docs/results/2026-12-03-box-copies.md): what is left is the step's fixed cost (~2 us:
an 8 KiB one-box task takes 2.5 us) and ~0.37 us per box, not the issues. The tensor maps are
built on the host, once per buffer and address (the address table's cache key), and read by the
copies from global memory: no descriptor is built on the
device (:mod:`.bulk`'s docstring: why not Triton's ``make_tensor_descriptor``) and the data never
passes through registers.

Which regions: every region of the step must be mapped (its buffer's map exists: its rows are
16-byte aligned, see tensormap.mappable) and tile exactly into boxes (rows a multiple of BOX_ROWS,
columns of BOX_COLS), or a box's store would write past the region into its neighbours. Others
take :mod:`.bulk`'s 1-D copies (:func:`_suits` is the test).

One thread issues everything: thread 0 of the block loads each box into a ring stage of BOX_BYTES
(arriving on the stage's mbarrier with the byte count), waits for it, stores it to the
destination box, and refills the stage ``lag`` stores later (the same ring, waits, deadline and
error record as :func:`.bulk_copy._pipe`). The shared-memory layout of a landed box is row-major, 512
bytes a row: exactly a 1-D stage of 16 lines of 512 bytes, so :mod:`.bulk_reduce` sums boxes with
its own code (its ``TENSOR`` variant uses :func:`_load_sources` here).

The maps live in global memory, copied there from the host before the launch (the per-call table
may reuse an address with new contents): a block fences a map (``fence.proxy.tensormap::generic
.acquire.sys`` on its 128 bytes, the scope the CUDA programming guide gives for maps written from
the host) before its copies use it, once per region pair of a task, before the pair's first copy.
"""
from __future__ import annotations

import triton
import triton.language as tl

from .bulk import (ADD, COMMIT, COPY, DATA0, R_COL0, R_COLS, R_LD, R_ROW0, R_ROWS, R_SLOT, RW, WAIT_READ, _asm0, _close,
                   _do, _mbar_expect, _open, _short, _stages, _tid, _wait_read, _wait_stage)
from .sync import _clock

C = tl.constexpr
BOX_ROWS = 16  # a box: 16 rows of 256 bf16 (TMA's box has at most 256 elements a side)
BOX_COLS = 256
BOX_BYTES = BOX_ROWS * BOX_COLS * 2  # 8 KiB: one copy stage, one source's share of a reduce stage
MAP_BYTES = 128  # a CUtensorMap
ENTRY_WORDS = 32  # a slot's entry in the maps table (int64 words): its map, then a word that is 1 where it has one
MAPPED_WORD = MAP_BYTES // 8
BR, BC, BB, EW, MW = C(BOX_ROWS), C(BOX_COLS), C(BOX_BYTES), C(ENTRY_WORDS), C(MAPPED_WORD)


@triton.jit
def _fence_map(tmap):
    """The tensor map at global address ``tmap`` is read by the tensor proxy after the host's writes."""
    _do("fence.proxy.tensormap::generic.acquire.sys [$1], 128; mov.u32 $0, 0;", "=r,l", [tmap.to(tl.int64)])


@triton.jit
def _load_box(dst, tmap, col, row, bar):
    """The box at (row, col) of ``tmap``'s buffer -> shared ``dst``, completing on ``bar``."""
    _do("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$1], [$2, {$3, $4}], [$5]; "
        "mov.u32 $0, 0;", "=r,r,l,r,r,r",
        [dst.to(tl.int32), tmap.to(tl.int64), col.to(tl.int32), row.to(tl.int32), bar.to(tl.int32)])


@triton.jit
def _store_box(tmap, col, row, src, MODE: tl.constexpr):
    """Shared ``src`` -> the box at (row, col) of ``tmap``'s buffer (COPY), or added to it in bf16
    (ADD), into this thread's current bulk group."""
    if MODE == ADD:
        _do("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [$1, {$2, $3}], [$4]; "
            "mov.u32 $0, 0;", "=r,l,r,r,r", [tmap.to(tl.int64), col.to(tl.int32), row.to(tl.int32), src.to(tl.int32)])
    else:
        _do("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [$1, {$2, $3}], [$4]; "
            "mov.u32 $0, 0;", "=r,l,r,r,r", [tmap.to(tl.int64), col.to(tl.int32), row.to(tl.int32), src.to(tl.int32)])


@triton.jit
def _map(maps, slot):
    """The global address of ``slot``'s tensor map (``maps``: the int64 table, ENTRY_WORDS a slot)."""
    return (maps + slot * EW).to(tl.int64)


@triton.jit
def _boxed(regions, maps, i):
    """Whether region row ``i`` has a tensor map and tiles exactly into boxes."""
    row = regions + i * RW
    return (tl.load(maps + tl.load(row + R_SLOT) * EW + MW) != 0) & (tl.load(row + R_ROWS) % BR == 0) & \
        (tl.load(row + R_COLS) % BC == 0)


@triton.jit
def _suits(regions, maps, r0, nreads, ns, MODE: tl.constexpr):
    """Whether a copy or reduce-add task may take the box path: the ring holds a stage and every
    region of it is boxed (:func:`_boxed`). For a copy, reads[p] pairs with writes[p]; otherwise
    every read goes into writes[0]. Block-uniform (table loads only)."""
    ok = ns > 0
    for p in range(nreads):
        ok = ok & _boxed(regions, maps, r0 + p) & _boxed(regions, maps, r0 + nreads + tl.where(MODE == COPY, p, 0))
    return ok


@triton.jit
def _strided(regions, r0, nreads, MODE: tl.constexpr):
    """Whether some region pair of the task is not one contiguous range (rows narrower than their
    buffers): there boxes beat 1-D copies, which move one line per copy; a contiguous pair streams
    faster as 1-D 16 KiB pieces (bench_bulk copy-rows at 16 SMs: 1098 GB/s 1-D, 612 as boxes)."""
    strided = nreads < 0
    for p in range(nreads):
        src = regions + (r0 + p) * RW
        dst = regions + (r0 + nreads + tl.where(MODE == COPY, p, 0)) * RW
        cols = tl.load(src + R_COLS)
        strided = strided | (cols != tl.load(src + R_LD)) | (cols != tl.load(dst + R_LD))
    return strided


@triton.jit
def _at(regions, maps, i):
    """Region row ``i``: its buffer's tensor map (fenced), first row and column, and boxes down and across."""
    row = regions + i * RW
    tmap = _map(maps, tl.load(row + R_SLOT))
    _fence_map(tmap)
    return tmap, tl.load(row + R_ROW0), tl.load(row + R_COL0), tl.load(row + R_ROWS) // BR, tl.load(row + R_COLS) // BC


@triton.jit
def _fill(s, f, nc, sm, smap, s_row0, s_col0):
    """Stage ``s`` <- box ``f`` of the source region (boxes in row-major order, ``nc`` across)."""
    bar = sm + 8 * s
    _mbar_expect(bar, bar * 0 + BB, bar == bar)  # (tensors: _mbar_expect converts its operands)
    _load_box(sm + DATA0 + s * BB, smap, s_col0 + (f % nc) * BC, s_row0 + (f // nc) * BR, bar)


@triton.jit
def _pipe(smap, s_row0, s_col0, dmap, d_row0, d_col0, n, nc, s0, ph0, ns, sm, ctx, MODE: tl.constexpr,
          LAG: tl.constexpr):
    """One region pair's ``n`` boxes through the ring, by this thread alone: the first ``ns`` loaded
    at once, each stored once landed, its stage refilled ``lag`` stores later (:func:`.bulk_copy._pipe`'s
    order). Returns the ring position after it."""
    lag = tl.minimum(LAG, ns - 1)
    fs = s0
    for f in range(tl.minimum(ns, n)):
        _fill(fs, f, nc, sm, smap, s_row0, s_col0)
        fs = tl.where(fs + 1 == ns, 0, fs + 1)
    s, ph = s0, ph0
    for j in range(n):
        q = j - 1 - lag  # the store whose stage is refilled now
        if (q >= 0) & (q + ns < n):
            _wait_read(lag)
            _fill(fs, q + ns, nc, sm, smap, s_row0, s_col0)
            fs = tl.where(fs + 1 == ns, 0, fs + 1)
        _wait_stage(sm + 8 * s, ph, s, *ctx)
        _store_box(dmap, d_col0 + (j % nc) * BC, d_row0 + (j // nc) * BR, sm + DATA0 + s * BB, MODE)
        _asm0(COMMIT)
        ph = tl.where(s + 1 == ns, ph ^ 1, ph)
        s = tl.where(s + 1 == ns, 0, s + 1)
    _asm0(WAIT_READ)
    return s, ph


@triton.jit
def _steps(regions, maps, r0, nreads, timeout_ns, err32, err64, rank, role, task, epoch, MODE: tl.constexpr,
           LAG: tl.constexpr):
    """Copy (writes[p] = reads[p]) or reduce-add (writes[0] += each read, in bf16 at the
    destination, atomically per element) of a boxed task (:func:`_suits`), every pair issued by
    thread 0; the other threads wait at the closing barrier."""
    ns = _stages(BB)
    _short(ns, BB, err32, err64, rank, role, task, epoch)
    if ns > 0:
        tid = _tid()
        sm = _open(ns, tid, False)
        if tid == 0:
            ctx = (_clock(), timeout_ns, err32, err64, rank, role, task, epoch)
            s, ph = tid - tid, tid - tid
            for p in range(nreads):
                smap, s_row0, s_col0, down, nc = _at(regions, maps, r0 + p)
                dmap, d_row0, d_col0, _d, _c = _at(regions, maps, r0 + nreads + tl.where(MODE == COPY, p, 0))
                s, ph = _pipe(smap, s_row0, s_col0, dmap, d_row0, d_col0, down * nc, nc, s, ph, ns, sm, ctx, MODE, LAG)
        _close(sm, ns, tid, False)


@triton.jit
def _fence_sources(regions, maps, r0, nreads):
    """Fence every source's map of a reduce task once, before its first stage (:func:`_fence_map`)."""
    for p in range(nreads):
        _fence_map(_map(maps, tl.load(regions + (r0 + p) * RW + R_SLOT)))


@triton.jit
def _load_sources(s, lb, c, sm, regions, maps, r0, nreads, stage_bytes):
    """A reduce stage of boxes: box (lb, c) of every source, source p at p x BOX_BYTES of stage
    ``s``, thread 0 arriving with all their bytes (for :func:`.bulk_reduce._reduce`; the maps fenced
    by :func:`_fence_sources`)."""
    bar = sm + 8 * s
    _mbar_expect(bar, nreads.to(tl.int32) * BB, bar == bar)
    for p in range(nreads):
        row = regions + (r0 + p) * RW
        tmap = _map(maps, tl.load(row + R_SLOT))
        _load_box(sm + DATA0 + s * stage_bytes + p * BB, tmap, tl.load(row + R_COL0) + c * BC,
                  tl.load(row + R_ROW0) + lb * BR, bar)


@triton.jit
def _copy(regions, maps, r0, nreads, timeout_ns, err32, err64, rank, role, task, epoch, LAG: tl.constexpr):
    """writes[i] = reads[i], pairwise, box by box."""
    _steps(regions, maps, r0, nreads, timeout_ns, err32, err64, rank, role, task, epoch, COPY, LAG)


@triton.jit
def _accumulate(regions, maps, r0, nreads, timeout_ns, err32, err64, rank, role, task, epoch, LAG: tl.constexpr):
    """writes[0] += reads[0] + ... + reads[n-1], each box added in bf16 at the destination."""
    _steps(regions, maps, r0, nreads, timeout_ns, err32, err64, rank, role, task, epoch, ADD, LAG)
