"""The fused kernel: one persistent Triton kernel that walks a rank's plan (see :mod:`plan`).

Why one kernel for every op: a schedule is data, so the device code is an interpreter of role
tables. Blocks take roles by index (compute, intra, send, recv, in that order); each role's blocks
claim the tasks of their queue in order from a counter, like the simulator's SMs. A task waits for
its slots to reach the epoch's targets, does its op, and bumps its signals with a system-scope
release. The op set is a compile-time switch, so each fused op compiles to its own kernel with only
the code it uses (a GEMM op carries no attention code, and the other way round).

Progress: the grid is the schedule's SM budget (at most the SMs this rank may use) and every block
fits on one SM, so all blocks are co-resident and a spinning block never keeps another from
running. Every wait is bounded (``timeout_ns``) and stops early once any block has recorded an
error or the proxy has aborted; the first error names rank, role, slot, epoch, seen and expected,
and the schedule task (:class:`mkernel.hw.runtime.ErrorBlock`).

Memory order: signals are ``atom.add.release.sys`` after a block barrier and a ``fence.acq_rel.sys``;
waits are ``ld.acquire.sys``; the compute role adds ``fence.proxy.async`` after a wait, because its
TMA loads read through the async proxy what peers wrote through the generic one. Ring records are
committed with ``st.release.sys`` after the body (runtime.cuh describes the protocol).

Epochs live on the device (read + 1 at start, stored by the last block to finish), so calls need
no host synchronisation and no flag is ever zeroed.
"""
from __future__ import annotations

import triton
import triton.language as tl

C = tl.constexpr
GEMM, COPY, REDUCE, GATHER, PUT, ATTN, NORM = C(0), C(1), C(2), C(3), C(4), C(5), C(6)  # plan.OP_CODE (ir.Op order)
SIGNAL = C(2)  # ring.SIGNAL
ERR_TIMEOUT, ERR_ABORTED = C(8), C(9)
TW, RW, CW = C(16), C(8), C(8)  # plan.TASK_WIDTH, REGION_WIDTH, COMMAND_WIDTH


@triton.jit
def _asm64(asm: tl.constexpr, constraints: tl.constexpr, args):
    return tl.inline_asm_elementwise(asm, constraints, args, dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _clock():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _ld_acquire(addr):
    return _asm64("ld.acquire.sys.global.u64 $0, [$1];", "=l,l", [addr])


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
def _m8(x, n: tl.constexpr):
    """``x`` (a row stride or column offset the plan checked) as a multiple of ``n``: an int32, since
    Triton keeps divisibility hints on 32-bit scalars only (16-byte vectors follow from them)."""
    return tl.multiple_of(x.to(tl.int32), n)


@triton.jit
def _raw(addr, dtype: tl.constexpr):
    """A pointer from an address, for scalar accesses (ring records, flags)."""
    return addr.to(tl.pointer_type(dtype))


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
def _record(err32, err64, code, rank, role, what, index, epoch, seen, expected, task):
    """The first error wins; later ones leave it as it is."""
    if tl.atomic_cas(err32, 0, code) == 0:
        tl.store(err32 + 1, rank)
        tl.store(err32 + 2, role)
        tl.store(err32 + 3, what)
        tl.store(err64 + 2, index)
        tl.store(err64 + 3, epoch)
        tl.store(err64 + 4, seen)
        tl.store(err64 + 5, expected)
        tl.store(err64 + 6, task)


@triton.jit
def _wait(addr, target, index, epoch, task, rank, role, timeout_ns, err32, err64, ctl):
    """Spin until the u64 at ``addr`` reaches ``target``: bounded, and abandoned once anyone failed."""
    v = _ld_acquire(addr)
    if v < target:
        start = _clock()
        it = 0
        going = True
        while going & (v < target):
            v = _ld_acquire(addr)
            it += 1
            if (it % 256) == 0:
                if tl.load(err32, volatile=True) != 0:
                    going = False
                elif (ctl != 0) & ((it % 4096) == 0):
                    if _ld_acquire(ctl + 64) != 0:
                        _record(err32, err64, ERR_ABORTED, rank, role, 0, index, epoch, v, target, task)
                        going = False
                if going & (_clock() - start > timeout_ns):
                    _record(err32, err64, ERR_TIMEOUT, rank, role, 0, index, epoch, v, target, task)
                    going = False


@triton.jit
def _region(regions, i):
    row = regions + i * RW
    base_slot = tl.load(row)
    return base_slot, tl.load(row + 1), tl.load(row + 2), tl.load(row + 3), tl.load(row + 4), tl.load(row + 5), \
        tl.load(row + 6)


@triton.jit
def _gemm(regions, bases, r0, a_host, b_host, HOST_DESC: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
          BK: tl.constexpr):
    """writes[0] = reads[0] @ reads[1] in BM x BN sub-tiles. TMA descriptors come from the host when
    every GEMM tile of the rank reads the same two buffers (kernel parameters: nothing to build or
    fence per tile), else the kernel builds them per tile from the address table."""
    a_s, a_r0, a_c0, a_rows, a_cols, a_ld, a_brows = _region(regions, r0)
    b_s, b_r0, b_c0, b_rows, b_cols, b_ld, b_brows = _region(regions, r0 + 1)
    c_s, c_r0, c_c0, c_rows, c_cols, c_ld, c_brows = _region(regions, r0 + 2)
    if HOST_DESC:
        a_desc = a_host
        b_desc = b_host
    else:
        a_desc = tl.make_tensor_descriptor(_buf(bases, a_s, tl.bfloat16, 2),
                                           shape=[a_brows.to(tl.int32), a_ld.to(tl.int32)], strides=[a_ld, 1],
                                           block_shape=[BM, BK])
        b_desc = tl.make_tensor_descriptor(_buf(bases, b_s, tl.bfloat16, 2),
                                           shape=[b_brows.to(tl.int32), b_ld.to(tl.int32)], strides=[b_ld, 1],
                                           block_shape=[BK, BN])
    c = _buf(bases, c_s, tl.bfloat16, 2)
    c_ld, c_c0, c_cols = _m8(c_ld, 8), _m8(c_c0, 8), _m8(c_cols, 8)  # the plan checks: 16-byte stores
    tiles_n = tl.cdiv(c_cols, BN)
    for sub in range(tl.cdiv(c_rows, BM) * tiles_n):
        sm = sub // tiles_n
        sn = sub % tiles_n
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kt in range(tl.cdiv(a_cols, BK)):
            a = a_desc.load([(a_r0 + sm * BM).to(tl.int32), (a_c0 + kt * BK).to(tl.int32)])
            b = b_desc.load([(b_r0 + kt * BK).to(tl.int32), (b_c0 + sn * BN).to(tl.int32)])
            acc = tl.dot(a, b, acc)
        rm = sm * BM + tl.arange(0, BM)
        rn = sn * BN + tl.arange(0, BN)
        dst = c + (c_r0 + rm[:, None]).to(tl.int64) * c_ld + c_c0 + rn[None, :]
        tl.store(dst, acc.to(tl.bfloat16), mask=(rm[:, None] < c_rows) & (rn[None, :] < c_cols))


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
        pick = tl.load(aux + (a0 + rr) * CW, mask=rr < rows, other=0)
        x = tl.load(src + (s_r0 + pick[:, None]) * s_ld + s_c0 + cc[None, :], mask=m)
        tl.store(dst + (d_r0 + rr[:, None]).to(tl.int64) * d_ld + d_c0 + cc[None, :], x, mask=m)


@triton.jit
def _push(kind, dst_rank, flag, nbytes, src_off, dst_off, epoch, records, ctl, head, capacity, task, rank, timeout_ns,
          err32, err64):
    """One command into the GPU->host ring: claim a slot, wait for its credit, write, commit."""
    slot = tl.atomic_add(head, 1, sem="relaxed", scope="gpu")
    tail = _ld_acquire(ctl)
    if slot - tail >= capacity:
        start = _clock()
        going = True
        while going & (slot - tail >= capacity):
            tail = _ld_acquire(ctl)
            if _ld_acquire(ctl + 64) != 0:
                _record(err32, err64, ERR_ABORTED, rank, 2, 1, slot, epoch, tail, slot - capacity + 1, task)
                going = False
            elif _clock() - start > timeout_ns:
                _record(err32, err64, ERR_TIMEOUT, rank, 2, 1, slot, epoch, tail, slot - capacity + 1, task)
                going = False
    if slot - tail < capacity:
        rec = records + (slot % capacity) * 48
        tl.store(_raw(rec, tl.int32) + 1, (kind | (dst_rank << 16)).to(tl.int32))
        tl.store(_raw(rec + 8, tl.int64), flag | (nbytes << 32))
        tl.store(_raw(rec + 16, tl.int64), src_off)
        tl.store(_raw(rec + 24, tl.int64), dst_off)
        tl.store(_raw(rec + 32, tl.int64), epoch)
        tl.store(_raw(rec + 40, tl.int64), _clock())
        tl.debug_barrier()
        _st_release32(rec, (slot + 1).to(tl.int32))


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


@triton.jit
def _attn(regions, bases, locks, r0, lock, q0, k0, masked, epoch, task, rank, timeout_ns, err32, err64, sm_scale,
          D: tl.constexpr, BQ: tl.constexpr, BKV: tl.constexpr):
    """Merge softmax(q k^T * scale) v of one key block into the tile's (acc, m, l) under its lock."""
    q_s, q_r0, q_c0, q_rows, _c, q_ld, _ = _region(regions, r0)
    k_s, k_r0, k_c0, k_rows, _c2, k_ld, _ = _region(regions, r0 + 1)
    v_s, v_r0, v_c0, _r, _c3, v_ld, _ = _region(regions, r0 + 2)
    a_s, a_r0, a_c0, _r2, _c4, a_ld, _ = _region(regions, r0 + 3)
    t_s, t_r0, _c5, _r3, _c6, t_ld, _ = _region(regions, r0 + 4)
    q_ld, k_ld, v_ld, a_ld = _m8(q_ld, 8), _m8(k_ld, 8), _m8(v_ld, 8), \
        _m8(a_ld, 8)  # the plan checks these: 16-byte vector loads and stores
    q_c0, k_c0, v_c0, a_c0 = _m8(q_c0, 8), _m8(k_c0, 8), _m8(v_c0, 8), \
        _m8(a_c0, 8)
    qp = _buf(bases, q_s, tl.bfloat16, 2)
    kp = _buf(bases, k_s, tl.bfloat16, 2)
    vp = _buf(bases, v_s, tl.bfloat16, 2)
    ap = _buf(bases, a_s, tl.float32, 4)
    tp = _buf(bases, t_s, tl.float32, 4)
    d = tl.arange(0, D)
    qk_scale = sm_scale * 1.4426950408889634  # log2(e)
    # the lock serialises merges into this accumulator; its stamp says whether the state is this call's
    lk = locks + 2 * lock
    free = epoch - epoch  # int64 zero: the lock word's type
    start = _clock()
    owned = tl.atomic_cas(lk, free, free + 1, sem="acquire", scope="gpu") == 0
    while (not owned) & (_clock() - start < timeout_ns):
        owned = tl.atomic_cas(lk, free, free + 1, sem="acquire", scope="gpu") == 0
    if not owned:
        _record(err32, err64, ERR_TIMEOUT, rank, 0, 0, lock, epoch, 1, 0, task)
    tl.debug_barrier()
    fresh = tl.load(lk + 1, volatile=True) < epoch
    for qb in range(tl.cdiv(q_rows, BQ)):
        rm = qb * BQ + tl.arange(0, BQ)
        mm = rm < q_rows
        q = tl.load(qp + (q_r0 + rm[:, None]).to(tl.int64) * q_ld + q_c0 + d[None, :], mask=mm[:, None], other=0.0)
        m_i = tl.full((BQ,), float("-inf"), tl.float32)
        l_i = tl.zeros((BQ,), tl.float32)
        acc = tl.zeros((BQ, D), tl.float32)
        for kb in range(tl.cdiv(k_rows, BKV)):
            rn = kb * BKV + tl.arange(0, BKV)
            mn = rn < k_rows
            k = tl.load(kp + (k_r0 + rn[:, None]).to(tl.int64) * k_ld + k_c0 + d[None, :], mask=mn[:, None], other=0.0)
            v = tl.load(vp + (v_r0 + rn[:, None]).to(tl.int64) * v_ld + v_c0 + d[None, :], mask=mn[:, None], other=0.0)
            s = tl.dot(q, tl.trans(k)) * qk_scale  # log2 units: exp2 below
            visible = mn[None, :] & ((masked == 0) | ((k0 + rn)[None, :] <= (q0 + rm)[:, None]))
            s = tl.where(visible, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = tl.exp2(m_i - m_safe)
            p = tl.exp2(s - m_safe[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None] + tl.dot(p.to(tl.bfloat16), v)
            m_i = m_new
        m_i = m_i * 0.6931471805599453  # back to natural-log units for the stored state
        a_ptr = ap + (a_r0 + rm[:, None]).to(tl.int64) * a_ld + a_c0 + d[None, :]
        t_ptr = tp + (t_r0 + rm).to(tl.int64) * t_ld
        if not fresh:
            m_o = tl.load(t_ptr, mask=mm, other=float("-inf"))
            l_o = tl.load(t_ptr + 1, mask=mm, other=0.0)
            acc_o = tl.load(a_ptr, mask=mm[:, None], other=0.0)
            m_n = tl.maximum(m_o, m_i)
            m_s = tl.where(m_n == float("-inf"), 0.0, m_n)
            fo = tl.exp(m_o - m_s)
            fi = tl.exp(m_i - m_s)
            acc = acc_o * fo[:, None] + acc * fi[:, None]
            l_i = l_o * fo + l_i * fi
            m_i = m_n
        tl.store(a_ptr, acc, mask=mm[:, None])
        tl.store(t_ptr, m_i, mask=mm)
        tl.store(t_ptr + 1, l_i, mask=mm)
    tl.debug_barrier()
    if owned:
        tl.store(lk + 1, epoch)
        tl.atomic_xchg(lk, free, sem="release", scope="gpu")


@triton.jit
def _norm(regions, bases, r0, D: tl.constexpr, BQ: tl.constexpr):
    """(out, lse) = (acc / l, m + log l) of a finished attention tile."""
    a_s, a_r0, a_c0, rows, _c, a_ld, _ = _region(regions, r0)
    t_s, t_r0, _c1, _r1, _c2, t_ld, _ = _region(regions, r0 + 1)
    o_s, o_r0, o_c0, _r2, _c3, o_ld, _ = _region(regions, r0 + 2)
    e_s, e_r0, _c4, _r3, _c5, e_ld, _ = _region(regions, r0 + 3)
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
        m = tl.load(tp + (t_r0 + rm).to(tl.int64) * t_ld, mask=mm)
        l = tl.load(tp + (t_r0 + rm).to(tl.int64) * t_ld + 1, mask=mm, other=1.0)
        tl.store(op + (o_r0 + rm[:, None]).to(tl.int64) * o_ld + o_c0 + d[None, :], (acc / l[:, None]).to(tl.bfloat16),
                 mask=mm[:, None])
        tl.store(ep + (e_r0 + rm).to(tl.int64) * e_ld, m + tl.log(l), mask=mm)


@triton.jit
def fused_kernel(tasks, regions, waits, signals, aux, bases, flag_bases, claims, epoch_ptr, done_ptr, locks, a_host,
                 b_host, records, ctl, head, capacity, err32, err64, rank, world, gpn, arrive0, exit0, go, timeout_ns, sm_scale,
                 n0, n1, n2, n3, b0, b1, b2, b3,
                 BARRIER: tl.constexpr, HOST_DESC: tl.constexpr, HAS_GEMM: tl.constexpr, HAS_COPY: tl.constexpr, HAS_REDUCE: tl.constexpr,
                 HAS_GATHER: tl.constexpr, HAS_PUT: tl.constexpr, HAS_ATTN: tl.constexpr,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, CR: tl.constexpr, CC: tl.constexpr,
                 D: tl.constexpr, BQ: tl.constexpr, BKV: tl.constexpr):
    pid = tl.program_id(0)
    epoch = tl.load(epoch_ptr, volatile=True) + 1
    role = (pid >= b0).to(tl.int32) + (pid >= b0 + b1).to(tl.int32) + (pid >= b0 + b1 + b2).to(tl.int32)
    n_tasks = tl.where(role == 0, n0, tl.where(role == 1, n1, tl.where(role == 2, n2, n3)))
    n_blocks = tl.where(role == 0, b0, tl.where(role == 1, b1, tl.where(role == 2, b2, b3)))
    first = tl.where(role == 0, 0, tl.where(role == 1, n0, tl.where(role == 2, n0 + n1, n0 + n1 + n2)))
    claim_base = (epoch - 1) * (n_tasks + n_blocks)  # every block claims once past the end per call
    own_flags = tl.load(flag_bases + rank)
    if BARRIER:  # every peer has entered this call: it finished the last one and staged its inputs
        if pid == 0:
            _tell_peers(arrive0, flag_bases, epoch, rank, world, gpn, records, ctl, head, capacity, timeout_ns,
                        err32, err64, HAS_PUT)
            for p in range(world):
                if p != rank:
                    _wait(own_flags + 8 * (arrive0 + p), epoch, arrive0 + p, epoch, -1, rank, role, timeout_ns,
                          err32, err64, ctl)
            _st_release64(own_flags + 8 * go, epoch)
        else:
            _wait(own_flags + 8 * go, epoch, go, epoch, -1, rank, role, timeout_ns, err32, err64, ctl)
    i = tl.atomic_add(claims + role, 1, sem="relaxed", scope="gpu") - claim_base
    while i < n_tasks:
        row = tasks + (first + i) * TW
        op = tl.load(row)
        nreads = tl.load(row + 1)
        r0 = tl.load(row + 2)
        task = tl.load(row + 14)
        for w in range(tl.load(row + 4), tl.load(row + 5)):
            slot = tl.load(waits + 3 * w)
            target = (epoch - 1) * tl.load(waits + 3 * w + 2) + tl.load(waits + 3 * w + 1)
            _wait(own_flags + 8 * slot, target, slot, epoch, task, rank, role, timeout_ns, err32, err64, ctl)
        if HAS_GEMM:
            if op == GEMM:
                _fence_async()
                _gemm(regions, bases, r0, a_host, b_host, HOST_DESC, BM, BN, BK)
        if HAS_COPY:
            if op == COPY:
                _copy(regions, bases, r0, nreads, CR, CC)
        if HAS_REDUCE:
            if op == REDUCE:
                _reduce(regions, bases, r0, nreads, CR, CC)
        if HAS_GATHER:
            if op == GATHER:
                _gather(regions, bases, aux, r0, tl.load(row + 8), tl.load(row + 9), CR, CC)
        if HAS_PUT:
            if op == PUT:
                tl.debug_barrier()
                for c in range(tl.load(row + 8), tl.load(row + 9)):
                    cmd = aux + c * CW
                    _push(tl.load(cmd), tl.load(cmd + 1), tl.load(cmd + 2), tl.load(cmd + 3), tl.load(cmd + 4),
                          tl.load(cmd + 5), epoch, records, ctl, head, capacity, task, rank, timeout_ns, err32, err64)
        if HAS_ATTN:
            if op == ATTN:
                _attn(regions, bases, locks, r0, tl.load(row + 13), tl.load(row + 10), tl.load(row + 11),
                      tl.load(row + 12), epoch, task, rank, timeout_ns, err32, err64, sm_scale, D, BQ, BKV)
            if op == NORM:
                _norm(regions, bases, r0, D, BQ)
        s0 = tl.load(row + 6)
        s1 = tl.load(row + 7)
        if s1 > s0:
            tl.debug_barrier()
            for s in range(s0, s1):
                target = tl.load(signals + 2 * s)
                flag = _raw(tl.load(flag_bases + target) + 8 * tl.load(signals + 2 * s + 1), tl.int64)
                if target == rank:  # this GPU only: a gpu-scope release is enough and far cheaper
                    tl.atomic_add(flag, 1, sem="release", scope="gpu")
                else:
                    _fence_sys()
                    tl.atomic_add(flag, 1, sem="release", scope="sys")
        i = tl.atomic_add(claims + role, 1, sem="relaxed", scope="gpu") - claim_base
    # the epoch: the last block to finish stores it for the next launch on this stream
    tl.debug_barrier()
    if tl.atomic_add(done_ptr, 1, sem="acq_rel", scope="gpu") == b0 + b1 + b2 + b3 - 1:
        tl.store(done_ptr, 0)
        tl.store(epoch_ptr, epoch)
        if BARRIER:  # tell peers this call is over here: they may overwrite what this rank read of theirs
            _fence_sys()
            _tell_peers(exit0, flag_bases, epoch, rank, world, gpn, records, ctl, head, capacity, timeout_ns,
                        err32, err64, HAS_PUT)


@triton.jit
def enter_kernel(flag_bases, epoch_ptr, rank, world, exit0, timeout_ns, err32, err64, ctl):
    """Before a call stages inputs into the heap: wait until every peer finished the previous call,
    so nothing a peer may still read is overwritten."""
    done = tl.load(epoch_ptr, volatile=True)  # the previous call's epoch
    own = tl.load(flag_bases + rank)
    for p in range(world):
        if p != rank:
            _wait(own + 8 * (exit0 + p), done, exit0 + p, done + 1, -1, rank, 0, timeout_ns, err32, err64, ctl)


def signature(ops: frozenset[str], head_dim: int = 64) -> tuple[dict, dict]:
    """(signature, constexprs) for compiling without a GPU (CI), for a kernel holding ``ops``."""
    const = constexprs(ops, head_dim, barrier=True, host_desc="gather" not in ops)
    types = {"a_host": f"tensordesc<bf16[{const['BM']}, {const['BK']}]>",
             "b_host": f"tensordesc<bf16[{const['BK']}, {const['BN']}]>", "done_ptr": "*i32", "records": "i64",
             "ctl": "i64", "capacity": "i64", "err32": "*i32", "timeout_ns": "i64", "sm_scale": "fp32"}
    ints = {"rank", "world", "gpn", "arrive0", "exit0", "go", "n0", "n1", "n2", "n3", "b0", "b1", "b2", "b3"}
    sig = {n: types.get(n, "i32" if n in ints else "*i64") for n in fused_kernel.arg_names if n not in const}
    return sig, const


def constexprs(ops: frozenset[str], head_dim: int, barrier: bool, host_desc: bool) -> dict:
    """The compile-time switches of the kernel for one op set."""
    return {"BARRIER": barrier, "HOST_DESC": host_desc, "HAS_GEMM": "gemm" in ops, "HAS_COPY": "copy" in ops, "HAS_REDUCE": "reduce" in ops,
            "HAS_GATHER": "gather" in ops, "HAS_PUT": "put" in ops, "HAS_ATTN": "attn" in ops,
            "BM": 128, "BN": 256 if "attn" not in ops else 128, "BK": 64, "CR": 16, "CC": 256,
            "D": head_dim, "BQ": 128, "BKV": 128 if head_dim <= 64 else 64}


NUM_WARPS, NUM_STAGES = 8, 3
