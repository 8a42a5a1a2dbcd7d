"""The fused kernel's data ops (Triton): GEMM tiles, copies, reductions, gathers and attention, each
reading its operands from a rank's plan (region rows) and the per-call address table.

Buffer pointers are the ``bases`` argument plus an element offset (:func:`_buf`), and row strides
and column offsets are 32-bit multiples of 8 (:func:`_m8`): the plan checks both, and only in this
form can Triton prove 16-byte alignment and emit vector accesses and cp.async pipelines.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..lowering.layout import (COMMAND_WIDTH, GEMM_TILE_WIDTH, LOCK_WIDTH, REGION_WIDTH, SEGMENT_WIDTH, AttnOperand,
                               Command, GemmOperand, GemmTile, Lock, NormOperand, Region, Segment, Stat)
from .sync import ERR_TIMEOUT, ROLE_COMPUTE, WHAT_FLAG, _bar_sync, _bulk_writes_done, _bump_masked, _clock_uniform, \
    _record, _release_stores_if

C = tl.constexpr
RW, CW, GW, SGW, LKW = C(REGION_WIDTH), C(COMMAND_WIDTH), C(GEMM_TILE_WIDTH), C(SEGMENT_WIDTH), C(LOCK_WIDTH)
R_SLOT, R_ROW0, R_COL0, R_ROWS, R_COLS, R_LD, R_BUF_ROWS, R_BUF_ID = (C(int(c)) for c in Region)
A_SOURCE_ROW, A_MERGES = C(int(Command.SOURCE_ROW)), C(int(Command.MERGES))
LK_OWNER, LK_STAMP, LK_MERGED = (C(int(c)) for c in (Lock.OWNER, Lock.STAMP, Lock.MERGED))
ST_M, ST_L = (C(int(c)) for c in Stat)
GEMM_A, GEMM_B, GEMM_C = (C(int(c)) for c in GemmOperand)
ATTN_Q, ATTN_K, ATTN_V, ATTN_ACC, ATTN_STATS, ATTN_OUT, ATTN_LSE = (C(int(c)) for c in AttnOperand)
NORM_ACC, NORM_STATS, NORM_OUT, NORM_LSE = (C(int(c)) for c in NormOperand)
G_A_ROW0, G_B_COL0, G_C_SLOT, G_C_LD, G_C_ROW0, G_C_COL0, G_C_ROWS, G_C_COLS, G_SIG_RANK, G_SIG_SLOT = (
    C(int(c)) for c in GemmTile)
SG_FIRST, SG_END, SG_A_INDEX, SG_K0, SG_K_COLS = (C(int(c)) for c in Segment)


@triton.jit
def _m8(x, n: tl.constexpr):
    """``x`` (a row stride or column offset the plan checked) as a multiple of ``n``: an int32, since
    Triton keeps divisibility hints on 32-bit scalars only (16-byte vectors follow from them)."""
    return tl.multiple_of(x.to(tl.int32), n)


@triton.jit
def _buf(bases, slot, dtype: tl.constexpr, ELEM: tl.constexpr):
    """The typed base pointer of buffer slot ``slot``, written as the ``bases`` argument plus an
    element offset. Why not an int-to-pointer cast: Triton knows nothing of the alignment of a cast
    address and falls back to 2-byte accesses; a kernel argument is 16-byte aligned and every buffer
    base is (the plan's heap offsets, the executor's checks), so the offset is a multiple of
    16 / ELEM and loads and stores become 16-byte vectors (and cp.async in pipelined loops)."""
    anchor = bases.to(tl.pointer_type(dtype), bitcast=True)
    off = (tl.load(bases + slot) - bases.to(tl.int64)) // ELEM
    return anchor + tl.multiple_of(off, 16 // ELEM)


@triton.jit
def _region(regions, i):
    """Region row ``i`` (layout.Region): slot, row0, col0, rows, cols, ld, buffer rows."""
    row = regions + i * RW
    return tl.load(row + R_SLOT), tl.load(row + R_ROW0), tl.load(row + R_COL0), tl.load(row + R_ROWS), \
        tl.load(row + R_COLS), tl.load(row + R_LD), tl.load(row + R_BUF_ROWS)


@triton.jit
def _gemm(regions, bases, r0, a_host, a2_host, b_host, a2_buf, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """writes[0] = reads[0] @ reads[1] in BM x BN sub-tiles, through the host-built TMA descriptors
    of the rank's GEMM operands (kernel parameters): B, and A or, for tiles reading buffer
    ``a2_buf``, the second A (AllGather+GEMM's own rows and gathered rows). Why not descriptors
    built on the device (as the attention tile's are): each is written to Triton's global scratch
    and fenced, a cost a few-microsecond GEMM tile would feel and a long attention task does not;
    kernel parameters cost nothing per tile. The plan refuses GEMMs with more operand buffers."""
    a_s, a_r0, a_c0, a_rows, a_cols, a_ld, a_brows = _region(regions, r0 + GEMM_A)
    b_s, b_r0, b_c0, b_rows, b_cols, b_ld, b_brows = _region(regions, r0 + GEMM_B)
    c_s, c_r0, c_c0, c_rows, c_cols, c_ld, c_brows = _region(regions, r0 + GEMM_C)
    c = _buf(bases, c_s, tl.bfloat16, 2)
    a_desc = a_host  # one call site: the loop below is compiled once, not once per descriptor
    if tl.load(regions + (r0 + GEMM_A) * RW + R_BUF_ID) == a2_buf:
        a_desc = a2_host
    _mma(a_desc, b_host, a_r0.to(tl.int32), a_c0.to(tl.int32), a_cols.to(tl.int32), b_r0.to(tl.int32),
         b_c0.to(tl.int32), c, c_r0, _m8(c_c0, 8), c_rows.to(tl.int32), _m8(c_cols, 8), _m8(c_ld, 8), BM, BN, BK)


@triton.jit
def _mma(a_desc, b_desc, a_r0, a_c0, a_cols, b_r0, b_c0, c, c_r0, c_c0, c_rows, c_cols, c_ld, BM: tl.constexpr,
         BN: tl.constexpr, BK: tl.constexpr):
    """The task path's GEMM (tasks that wait, off the table): a region's BM x BN sub-tiles one after
    the other. Bounds and coordinates are 32-bit, so Triton pipelines the K loop (it pipelines loops
    with an i32 induction variable only); the C store is a scalar 64-bit pointer to the sub-tile plus
    32-bit offsets: a 128 x 256 tensor of 64-bit addresses would take 256 registers a thread."""
    tiles_n = tl.cdiv(c_cols, BN)
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    for sub in range(tl.cdiv(c_rows, BM) * tiles_n):
        sm = sub // tiles_n
        sn = sub % tiles_n
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kt in range(tl.cdiv(a_cols, BK)):
            a = a_desc.load([a_r0 + sm * BM, a_c0 + kt * BK])
            b = b_desc.load([b_r0 + kt * BK, b_c0 + sn * BN])
            acc = tl.dot(a, b, acc)
        dst = c + (c_r0 + sm * BM).to(tl.int64) * c_ld + c_c0 + sn * BN
        tl.store(dst + rm[:, None] * c_ld + rn[None, :], acc.to(tl.bfloat16),
                 mask=(sm * BM + rm[:, None] < c_rows) & (sn * BN + rn[None, :] < c_cols))


@triton.jit
def _gemm_table(gemm_tiles, segments, n_seg, pid, nb, a_host, a2_host, b_host, c_host, flag_bases, rank,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """This block's rows of the GEMM table (row g on block g mod ``nb``), one segment after the
    other: a segment reads one A operand over one K range (layout.Segment)."""
    for s in range(n_seg):
        seg = segments + s * SGW
        first = tl.load(seg + SG_FIRST).to(tl.int32)
        start = first + ((pid - first) % nb + nb) % nb  # 32-bit: Triton flattens loops of i32 only
        end = tl.load(seg + SG_END).to(tl.int32)
        k0 = tl.load(seg + SG_K0).to(tl.int32)
        k_cols = tl.load(seg + SG_K_COLS).to(tl.int32)
        a_desc = a_host
        if tl.load(seg + SG_A_INDEX) == 1:
            a_desc = a2_host
        if start < end:  # a region op between the loops: Triton flattens nests of exactly two loops
            _gemm_rows(gemm_tiles, start, end, nb, a_desc, b_host, c_host, k0, k_cols, flag_bases, rank, BM, BN, BK)


@triton.jit
def _gemm_rows(gemm_tiles, start, end, nb, a_desc, b_desc, c_desc, k0, k_cols, flag_bases, rank, BM: tl.constexpr,
               BN: tl.constexpr, BK: tl.constexpr):
    """GEMM table rows start, start + nb, ... < end: C tile = A[a_row0 +: BM, k0 +: k_cols] @
    B[k0 +: k_cols, b_col0 +: BN], TMA-stored (clipped at C's edges), then its signal.

    ``flatten``: the tile loop and the K loop become one loop that Triton software-pipelines, so
    the next tile's first loads are in flight while this tile's accumulator is stored, and the TMA
    store writes while the next tile's products run. A tile's signal is therefore sent late: at a
    later tile's epilogue its store has had a whole main loop to land, the block waits for it
    (``cp.async.bulk.wait_group 0``: the writes are done, not only the shared memory read), orders
    it before generic accesses (``fence.proxy.async``), and releases it.

    Consecutive tiles of this block that bump the same flag send one bump of their count, when the
    next tile signals another flag (or after the loop): the flag cannot reach its target before
    the run's last tile is stored anyway, so no consumer starts later, and the tiles in between
    skip the wait, the barrier and the atomic (at world 1 every tile bumps the one completion
    flag: a block then signals once per call)."""
    pend_rank = rank - rank - 1  # the run of tiles not signalled yet: its flag and its length
    pend_slot = rank - rank
    pend_n = rank - rank
    for g in tl.range(start, end, nb, flatten=True):
        row = gemm_tiles + g * GW
        a_r0 = tl.load(row + G_A_ROW0).to(tl.int32)
        b_c0 = tl.load(row + G_B_COL0).to(tl.int32)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kt in range(tl.cdiv(k_cols, BK)):
            kk = k0 + kt * BK
            acc = tl.dot(a_desc.load([a_r0, kk]), b_desc.load([kk, b_c0]), acc)
        sig_rank = tl.load(row + G_SIG_RANK).to(tl.int32)
        sig_slot = tl.load(row + G_SIG_SLOT).to(tl.int32)
        new_run = (sig_rank != pend_rank) | (sig_slot != pend_slot)
        send = new_run & (pend_rank >= 0)
        _release_stores_if(send)  # every thread's wait is done before the signal releases the run
        _bump_masked(flag_bases, tl.where(send, pend_rank, -1), pend_slot, rank, pend_n.to(tl.int64))
        c_desc.store([tl.load(row + G_C_ROW0).to(tl.int32), tl.load(row + G_C_COL0).to(tl.int32)],
                     acc.to(tl.bfloat16))
        pend_n = tl.where(new_run, 1, pend_n + 1)
        pend_rank = tl.where(new_run, sig_rank, pend_rank)
        pend_slot = tl.where(new_run, sig_slot, pend_slot)
    _bulk_writes_done()
    _bar_sync()
    _bump_masked(flag_bases, pend_rank, pend_slot, rank, pend_n.to(tl.int64))


@triton.jit
def _tile_offsets(t, rows, cols, CR: tl.constexpr, CC: tl.constexpr):
    cols = _m8(cols, 8)  # whole 16-byte vectors (the plan checks), so the column mask is too
    tiles_c = tl.cdiv(cols, CC)
    rr = (t // tiles_c) * CR + tl.arange(0, CR)
    cc = (t % tiles_c) * CC + tl.arange(0, CC)
    cc = tl.max_contiguous(tl.multiple_of(cc, 8), 8)
    return rr, cc, (rr[:, None] < rows) & (cc[None, :] < cols)


@triton.jit
def _copy(regions, bases, r0, nreads, CR: tl.constexpr, CC: tl.constexpr):
    """writes[i] = reads[i], pairwise (peer loads or stores where a region is another rank's)."""
    for p in range(nreads):
        s_s, s_r0, s_c0, rows, cols, s_ld, _ = _region(regions, r0 + p)
        d_s, d_r0, d_c0, _r, _c, d_ld, _ = _region(regions, r0 + nreads + p)
        src = _buf(bases, s_s, tl.bfloat16, 2)
        dst = _buf(bases, d_s, tl.bfloat16, 2)
        s_ld, d_ld, s_c0, d_c0 = _m8(s_ld, 8), _m8(d_ld, 8), _m8(s_c0, 8), _m8(d_c0, 8)
        for t in range(tl.cdiv(rows, CR) * tl.cdiv(cols, CC)):
            rr, cc, m = _tile_offsets(t, rows, cols, CR, CC)
            x = tl.load(src + (s_r0 + rr[:, None]).to(tl.int64) * s_ld + s_c0 + cc[None, :], mask=m)
            tl.store(dst + (d_r0 + rr[:, None]).to(tl.int64) * d_ld + d_c0 + cc[None, :], x, mask=m)


@triton.jit
def _reduce(regions, bases, r0, nreads, CR: tl.constexpr, CC: tl.constexpr):
    """writes[0] = sum(reads), summed in fp32."""
    d_s, d_r0, d_c0, rows, cols, d_ld, _ = _region(regions, r0 + nreads)
    dst = _buf(bases, d_s, tl.bfloat16, 2)
    d_ld, d_c0 = _m8(d_ld, 8), _m8(d_c0, 8)
    for t in range(tl.cdiv(rows, CR) * tl.cdiv(cols, CC)):
        rr, cc, m = _tile_offsets(t, rows, cols, CR, CC)
        acc = tl.zeros((CR, CC), dtype=tl.float32)
        for p in range(nreads):
            s_s, s_r0, s_c0, _r, _c, s_ld, _ = _region(regions, r0 + p)
            src = _buf(bases, s_s, tl.bfloat16, 2)
            s_ld, s_c0 = _m8(s_ld, 8), _m8(s_c0, 8)
            acc += tl.load(src + (s_r0 + rr[:, None]).to(tl.int64) * s_ld + s_c0 + cc[None, :], mask=m).to(tl.float32)
        tl.store(dst + (d_r0 + rr[:, None]).to(tl.int64) * d_ld + d_c0 + cc[None, :], acc.to(tl.bfloat16), mask=m)


@triton.jit
def _gather(regions, bases, aux, r0, a0, a1, CR: tl.constexpr, CC: tl.constexpr):
    """Row i of writes[0] = row aux[a0 + i] of reads[0]."""
    s_s, s_r0, s_c0, _r, _c, s_ld, _ = _region(regions, r0)
    d_s, d_r0, d_c0, _r2, cols, d_ld, _ = _region(regions, r0 + 1)
    src = _buf(bases, s_s, tl.bfloat16, 2)
    dst = _buf(bases, d_s, tl.bfloat16, 2)
    s_ld, d_ld, s_c0, d_c0 = _m8(s_ld, 8), _m8(d_ld, 8), _m8(s_c0, 8), _m8(d_c0, 8)
    rows = a1 - a0
    for t in range(tl.cdiv(rows, CR) * tl.cdiv(cols, CC)):
        rr, cc, m = _tile_offsets(t, rows, cols, CR, CC)
        pick = tl.load(aux + (a0 + rr) * CW + A_SOURCE_ROW, mask=rr < rows, other=0)
        x = tl.load(src + (s_r0 + pick[:, None]) * s_ld + s_c0 + cc[None, :], mask=m)
        tl.store(dst + (d_r0 + rr[:, None]).to(tl.int64) * d_ld + d_c0 + cc[None, :], x, mask=m)


@triton.jit
def _attn(regions, bases, locks, aux, r0, a0, a1, lock, q0, k0, masked, epoch, task, rank, timeout_ns, err32, err64,
          sm_scale, D: tl.constexpr, BQ: tl.constexpr, BKV: tl.constexpr):
    """Merge softmax(q k^T * scale) v of one key block into the tile's (acc, m, l).

    Each query block of BQ rows computes its partial softmax in registers first and takes its own
    lock (``lock + block``) only to merge: merges of one tile from several key blocks (the zigzag
    halves, the ring's slices) then overlap their products and serialise only the read-modify-write
    of the fp32 state. A folded tile (one aux row: its merges per call; regions 5 and 6: out and
    lse) counts its merges in each lock, and the last one writes (acc / l, m + log l) instead; a
    folded tile of one merge (world 1, or a ring step that covers every key) takes no lock at all:
    the lock, its epoch stamp and the barriers around it cost microseconds a short task feels."""
    q_s, q_r0, q_c0, q_rows, _c, q_ld, _ = _region(regions, r0 + ATTN_Q)
    k_s, k_r0, k_c0, k_rows, _c2, k_ld, _ = _region(regions, r0 + ATTN_K)
    v_s, v_r0, v_c0, _r, _c3, v_ld, _ = _region(regions, r0 + ATTN_V)
    q_ld, k_ld, v_ld = _m8(q_ld, 8), _m8(k_ld, 8), _m8(v_ld, 8)  # the plan checks these: 16-byte vectors
    q_c0, k_c0, v_c0 = _m8(q_c0, 8), _m8(k_c0, 8), _m8(v_c0, 8)
    q_rows, k_rows = q_rows.to(tl.int32), k_rows.to(tl.int32)
    # a scalar 64-bit pointer to each region's first element and 32-bit offsets inside it: the offsets
    # span one query tile (its rows x ld), so a tile's address tensors take one register per vector
    qp = _buf(bases, q_s, tl.bfloat16, 2) + q_r0.to(tl.int64) * q_ld + q_c0
    # K and V through TMA descriptors built here (one per region, in the launch's global scratch):
    # no per-thread addresses in the key loops, and rows past the region read as zeros
    k_desc = tl.make_tensor_descriptor(_buf(bases, k_s, tl.bfloat16, 2) + k_r0.to(tl.int64) * k_ld + k_c0,
                                       shape=[k_rows, D], strides=[k_ld, 1], block_shape=[BKV, D])
    v_desc = tl.make_tensor_descriptor(_buf(bases, v_s, tl.bfloat16, 2) + v_r0.to(tl.int64) * v_ld + v_c0,
                                       shape=[k_rows, D], strides=[v_ld, 1], block_shape=[BKV, D])
    d = tl.arange(0, D)
    qk_scale = sm_scale * 1.4426950408889634  # log2(e)
    total = tl.load(aux + a0 * CW + A_MERGES, mask=a1 > a0, other=-1)  # merges per call of a folded tile; -1: not folded
    for qb in range(tl.cdiv(q_rows, BQ).to(tl.int32)):
        rm = qb * BQ + tl.arange(0, BQ)
        mm = rm < q_rows
        q = tl.load(qp + rm[:, None] * q_ld + d[None, :], mask=mm[:, None], other=0.0)
        # key blocks [0, full) are whole and visible to every row of this query block: no masks;
        # [full, end) need the bounds or the causal mask; blocks from `end` on are hidden from every row.
        # 32-bit bounds: Triton pipelines (cp.async, stages) only loops with an i32 induction variable
        first = tl.where(masked == 0, k_rows, q0 + qb * BQ - k0 + 1)
        last = tl.where(masked == 0, k_rows, q0 + qb * BQ + BQ - k0)
        full = (tl.minimum(tl.maximum(first, 0), k_rows) // BKV).to(tl.int32)
        end = tl.cdiv(tl.minimum(tl.maximum(last, 0), k_rows), BKV).to(tl.int32)
        m_i = tl.full((BQ,), float("-inf"), tl.float32)
        l_i = tl.zeros((BQ,), tl.float32)
        acc = tl.zeros((BQ, D), tl.float32)
        for kb in range(full):
            k = k_desc.load([kb * BKV, 0])
            v = v_desc.load([kb * BKV, 0])
            s = tl.dot(q, tl.trans(k))
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)  # finite: every key is visible
            p = tl.exp2(s * qk_scale - m_new[:, None])  # log2 units
            alpha = tl.exp2(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = tl.dot(p.to(tl.bfloat16), v, acc * alpha[:, None])  # accumulate in place: one fp32 tile
            m_i = m_new
        for kb in range(full, end):
            rn = kb * BKV + tl.arange(0, BKV)
            mn = rn < k_rows
            k = k_desc.load([kb * BKV, 0])
            v = v_desc.load([kb * BKV, 0])
            s = tl.dot(q, tl.trans(k)) * qk_scale
            visible = mn[None, :] & ((masked == 0) | ((k0 + rn)[None, :] <= (q0 + rm)[:, None]))
            s = tl.where(visible, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = tl.exp2(m_i - m_safe)
            p = tl.exp2(s - m_safe[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = tl.dot(p.to(tl.bfloat16), v, acc * alpha[:, None])
            m_i = m_new
        m_i = m_i * 0.6931471805599453  # back to natural-log units for the stored state
        if total == 1:  # the tile's only merge per call: nothing else touches its state, so no lock
            _attn_out(regions, bases, r0, rm, mm, d, acc, l_i, m_i)
        else:
            _merge_locked(regions, bases, locks, r0, lock + qb, rm, mm, d, acc, l_i, m_i, total, epoch, task, rank,
                          timeout_ns, err32, err64)


@triton.jit
def _merge_locked(regions, bases, locks, r0, lock, rm, mm, d, acc, l_i, m_i, total, epoch, task, rank, timeout_ns,
                  err32, err64):
    """Merge one query block's partial softmax into the tile's fp32 state under the block's lock,
    or, as the tile's last merge this call (``total``), write (acc / l, m + log l) instead."""
    # the state's regions are read only now: what lives across the key loops is what they need
    a_s, a_r0, a_c0, _r2, _c4, a_ld, _ = _region(regions, r0 + ATTN_ACC)
    t_s, t_r0, _c5, _r3, _c6, t_ld, _ = _region(regions, r0 + ATTN_STATS)
    a_ld, a_c0 = _m8(a_ld, 8), _m8(a_c0, 8)
    ap = _buf(bases, a_s, tl.float32, 4) + a_r0.to(tl.int64) * a_ld + a_c0
    tp = _buf(bases, t_s, tl.float32, 4) + t_r0.to(tl.int64) * t_ld
    # this query block's lock: word, epoch stamp, merges so far in that epoch
    lk = locks + LKW * lock
    free = epoch - epoch  # int64 zero: the lock word's type
    start = _clock_uniform()
    owned = tl.atomic_cas(lk + LK_OWNER, free, free + 1, sem="acquire", scope="gpu") == 0
    # the atomic's result reaches every thread through a barrier: the loop's exit must be uniform too
    while (not owned) & (_clock_uniform() - start < timeout_ns):
        owned = tl.atomic_cas(lk + LK_OWNER, free, free + 1, sem="acquire", scope="gpu") == 0
    if not owned:
        _record(err32, err64, ERR_TIMEOUT, rank, ROLE_COMPUTE, WHAT_FLAG, lock, epoch, 1, 0, task)  # a lock: as a flag
    tl.debug_barrier()
    fresh = tl.load(lk + LK_STAMP, volatile=True) < epoch
    merged = tl.where(fresh, 1, tl.load(lk + LK_MERGED, volatile=True) + 1)
    a_ptr = ap + rm[:, None] * a_ld + d[None, :]
    t_ptr = tp + rm * t_ld.to(tl.int32)
    if not fresh:
        m_o = tl.load(t_ptr + ST_M, mask=mm, other=float("-inf"))
        l_o = tl.load(t_ptr + ST_L, mask=mm, other=0.0)
        acc_o = tl.load(a_ptr, mask=mm[:, None], other=0.0)
        m_n = tl.maximum(m_o, m_i)
        m_s = tl.where(m_n == float("-inf"), 0.0, m_n)
        fo = tl.exp(m_o - m_s)
        fi = tl.exp(m_i - m_s)
        acc = acc_o * fo[:, None] + acc * fi[:, None]
        l_i = l_o * fo + l_i * fi
        m_i = m_n
    if merged == total:  # the tile's last merge: a folded tile, so its OUT and LSE regions exist
        _attn_out(regions, bases, r0, rm, mm, d, acc, l_i, m_i)
    else:
        tl.store(a_ptr, acc, mask=mm[:, None])
        tl.store(t_ptr + ST_M, m_i, mask=mm)
        tl.store(t_ptr + ST_L, l_i, mask=mm)
    tl.debug_barrier()
    if owned:
        tl.store(lk + LK_MERGED, merged)
        tl.store(lk + LK_STAMP, epoch)
        tl.atomic_xchg(lk + LK_OWNER, free, sem="release", scope="gpu")


@triton.jit
def _attn_out(regions, bases, r0, rm, mm, d, acc, l_i, m_i):
    """A finished query block of a folded tile: (acc / l, m + log l) into its OUT and LSE regions."""
    o_s, o_r0, o_c0, _r4, _c7, o_ld, _ = _region(regions, r0 + ATTN_OUT)
    e_s, e_r0, _c8, _r5, _c9, e_ld, _ = _region(regions, r0 + ATTN_LSE)
    o_ld, o_c0 = _m8(o_ld, 8), _m8(o_c0, 8)
    op = _buf(bases, o_s, tl.bfloat16, 2) + o_r0.to(tl.int64) * o_ld + o_c0
    ep = _buf(bases, e_s, tl.float32, 4) + e_r0.to(tl.int64) * e_ld
    tl.store(op + rm[:, None] * o_ld + d[None, :], (acc / l_i[:, None]).to(tl.bfloat16), mask=mm[:, None])
    tl.store(ep + rm * e_ld.to(tl.int32), m_i + tl.log(l_i), mask=mm)


@triton.jit
def _norm(regions, bases, r0, D: tl.constexpr, BQ: tl.constexpr):
    """(out, lse) = (acc / l, m + log l) of a finished attention tile."""
    a_s, a_r0, a_c0, rows, _c, a_ld, _ = _region(regions, r0 + NORM_ACC)
    t_s, t_r0, _c1, _r1, _c2, t_ld, _ = _region(regions, r0 + NORM_STATS)
    o_s, o_r0, o_c0, _r2, _c3, o_ld, _ = _region(regions, r0 + NORM_OUT)
    e_s, e_r0, _c4, _r3, _c5, e_ld, _ = _region(regions, r0 + NORM_LSE)
    a_ld, o_ld, a_c0, o_c0 = _m8(a_ld, 8), _m8(o_ld, 8), _m8(a_c0, 8), \
        _m8(o_c0, 8)
    ap = _buf(bases, a_s, tl.float32, 4)
    tp = _buf(bases, t_s, tl.float32, 4)
    op = _buf(bases, o_s, tl.bfloat16, 2)
    ep = _buf(bases, e_s, tl.float32, 4)
    d = tl.arange(0, D)
    for qb in range(tl.cdiv(rows, BQ)):
        rm = qb * BQ + tl.arange(0, BQ)
        mm = rm < rows
        acc = tl.load(ap + (a_r0 + rm[:, None]).to(tl.int64) * a_ld + a_c0 + d[None, :], mask=mm[:, None])
        m = tl.load(tp + (t_r0 + rm).to(tl.int64) * t_ld + ST_M, mask=mm)
        l = tl.load(tp + (t_r0 + rm).to(tl.int64) * t_ld + ST_L, mask=mm, other=1.0)
        tl.store(op + (o_r0 + rm[:, None]).to(tl.int64) * o_ld + o_c0 + d[None, :], (acc / l[:, None]).to(tl.bfloat16),
                 mask=mm[:, None])
        tl.store(ep + (e_r0 + rm).to(tl.int64) * e_ld, m + tl.log(l), mask=mm)
