"""The self-tests' device kernels (`mkernel selftest`, :mod:`selftest`, the proxy's calibration), in
Triton on the fused kernel's own protocol code: the bounded wait :func:`sync._wait`, the ring
producer :func:`sync._push`, the signal :func:`sync._bump`, the epoch's end :func:`sync._last_block`
and the error record they write. What these kernels check is what the fused kernel runs; there is no
second copy of the protocol to keep in step.

Data is a hash of (source, epoch, word), so stale data from an earlier epoch never passes a check.
Each kernel reads its epoch as the stored value + 1 and its last block stores it, as the fused
kernel does, so calls need no host synchronisation and a call can be captured in a CUDA graph.
Addresses (flag words, the ring's pinned records and control words, peers' buffers) are int64
arguments, as the fused kernel takes them.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..kernels.sync import ROLE_SEND, _block_all, _bump, _clock, _last_block, _push, _raw, _wait
from ..lowering import ring

C = tl.constexpr
PUT = C(ring.PUT)
ROLE_RECV = C(ring.ROLE_RECV)
WORDS = 1024  # int32 words a block moves or checks per step (BLOCK)
M32 = C(0xFFFFFFFF)


@triton.jit
def _mix(src, epoch, i):
    """A 32-bit hash of (source, epoch, word index) as int32: 64-bit products masked to 32 bits."""
    e = epoch.to(tl.int64)
    zero = e - e  # a runtime int64, so a constant source becomes a value
    h = (((zero + src) * 0x9E3779B1) ^ ((e & M32) * 0x85EBCA6B) ^ (e >> 32) ^ ((zero + i) * 0xC2B2AE35)) & M32
    h = h ^ (h >> 16)
    h = (h * 0x7FEB352D) & M32
    h = h ^ (h >> 15)
    return h.to(tl.uint32).to(tl.int32, bitcast=True)


@triton.jit
def _ok(err32):
    """Whether no block has recorded an error yet (a wait that ran out or was aborted), as one value
    for the whole block: a branch on it may hold barriers (a push, a block sum), and threads that
    read the word at different moments must not take different sides."""
    return _block_all(tl.load(err32, volatile=True) == 0)


@triton.jit
def _mismatches(buf, w0, words, src, epoch, BLOCK: tl.constexpr):
    """Words of ``buf[w0 : w0 + words]`` that are not ``_mix(src, epoch, w0 + i)``."""
    bad = 0
    offs = tl.arange(0, BLOCK)
    for i in range(0, words, BLOCK):
        w = w0 + i + offs
        got = tl.load(buf + w, mask=i + offs < words, other=0)
        bad += tl.sum(((got != _mix(src, epoch, w)) & (i + offs < words)).to(tl.int32))
    return bad


@triton.jit
def _fill(buf, w0, words, src, epoch, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    for i in range(0, words, BLOCK):
        tl.store(buf + w0 + i + offs, _mix(src, epoch, w0 + i + offs), mask=i + offs < words)


@triton.jit
def epochs_kernel(flag_bases, data, n_chunks, chunk_words, epoch_ptr, done_ptr, mism, err32, err64, timeout_ns,
                  delay_ns, BLOCK: tl.constexpr):
    """Two blocks. Block 1 writes each chunk for this epoch (after a delay, so block 0 usually meets
    the previous epoch's count first) and bumps the chunk's flag; block 0 waits for each flag to
    reach the epoch (one bump per call, never zeroed) and checks the data. A stale flag passing a
    wait shows up as mismatches."""
    epoch = tl.load(epoch_ptr, volatile=True) + 1
    if tl.program_id(0) == 1:
        for c in range(n_chunks):
            t0 = _clock()
            while _clock() - t0 < delay_ns:
                pass
            _fill(data, c * chunk_words, chunk_words, c, epoch, BLOCK)
            tl.debug_barrier()
            _bump(flag_bases, 0, c, 0)
    else:
        flags = tl.load(flag_bases)
        for c in range(n_chunks):
            if _ok(err32):
                _wait(flags + 8 * c, epoch, c, epoch, -1, 0, ROLE_RECV, timeout_ns, err32, err64, 0)
                if _ok(err32):
                    bad = _mismatches(data, c * chunk_words, chunk_words, c, epoch, BLOCK)
                    if bad > 0:
                        tl.atomic_add(mism, bad)
    if _last_block(done_ptr, 2):
        tl.store(done_ptr, 0)
        tl.store(epoch_ptr, epoch)


@triton.jit
def timeout_kernel(flag_addr, index, target, rank, role, err32, err64, timeout_ns, ctl):
    """A wait that nothing satisfies: it must time out (or stop on the proxy's abort word) and name
    rank, role, flag and epoch."""
    _wait(flag_addr + 8 * index, target, index, target, -1, rank, role, timeout_ns, err32, err64, ctl)


@triton.jit(do_not_specialize=("dst_rank", "n_iters", "kind", "nbytes", "base"))
def roundtrip_kernel(records, ctl, head, capacity, dst_flag, dst_rank, n_iters, kind, nbytes, base, lat, err32, err64,
                     timeout_ns):
    """One block: push a command for flag 0 of ``dst_rank``, wait until the flag shows it, repeat.
    ``lat[i]``: enqueue -> flag seen on the GPU, the proxy's whole round trip (0 once anything
    failed: a failed push records its error, and the wait after it stops on that error)."""
    nb = nbytes.to(tl.int64)  # _push packs it into a record's upper 32 bits
    for i in range(n_iters):
        if _ok(err32):
            v = base.to(tl.int64) + i + 1
            t0 = _clock()
            _push(kind, dst_rank, 0, nb, 0, 0, v, records, ctl, head, capacity, -1, 0, timeout_ns, err32, err64)
            _wait(dst_flag, v, 0, v, -1, 0, ROLE_SEND, timeout_ns, err32, err64, ctl)
            t1 = _clock()
            if _ok(err32):
                tl.store(lat + i, t1 - t0)


@triton.jit(do_not_specialize=("dst_rank", "kind", "chunks_per_block", "chunk_bytes"))
def stream_kernel(records, ctl, head, capacity, send, dst_flags, dst_rank, kind, chunks_per_block, chunk_bytes,
                  epoch_ptr, done_ptr, times, err32, err64, timeout_ns, BLOCK: tl.constexpr):
    """Many producers: block b fills its chunks of the send buffer for this epoch, pushes one command
    per chunk (chunk = flag index), then waits for its chunks' flags on the destination. ``times``:
    first push, last flag seen, and the sums over blocks of the time pushing and the time waiting."""
    epoch = tl.load(epoch_ptr, volatile=True) + 1
    words = chunk_bytes // 4
    first = tl.program_id(0) * chunks_per_block
    _fill(send, first * words, chunks_per_block * words, 0, epoch, BLOCK)
    tl.debug_barrier()
    t0 = _clock()
    tl.atomic_min(times, t0)
    for c in range(first, first + chunks_per_block):  # as the fused kernel's PUT task pushes: no check between
        _push(kind, dst_rank, c, chunk_bytes.to(tl.int64), c.to(tl.int64) * chunk_bytes, c.to(tl.int64) * chunk_bytes,
              epoch, records, ctl, head, capacity, -1, 0, timeout_ns, err32, err64)
    t1 = _clock()
    for c in range(first, first + chunks_per_block):  # a wait stops early once any block recorded an error
        _wait(dst_flags + 8 * c, epoch, c, epoch, -1, 0, ROLE_SEND, timeout_ns, err32, err64, ctl)
    t2 = _clock()
    tl.atomic_max(times + 1, t2)
    tl.atomic_add(times + 2, t1 - t0)
    tl.atomic_add(times + 3, t2 - t1)
    if _last_block(done_ptr, tl.num_programs(0)):
        tl.store(done_ptr, 0)
        tl.store(epoch_ptr, epoch)


# one binary for every rank of the emulated cluster (as fused.PER_RANK_ARGS)
@triton.jit(do_not_specialize=("rank", "nodes", "gpn", "shard_bytes", "chunk_bytes"))
def exchange_kernel(rank, nodes, gpn, send, recv_ptrs, flag_bases, shard_bytes, chunk_bytes, records, ctl, head,
                    capacity, epoch_ptr, done_ptr, mism, err32, err64, timeout_ns, BLOCK: tl.constexpr):
    """The emulated-cluster exchange. Rank r owns a shard split in chunks; block b handles chunks b,
    b + grid, ... For each chunk it writes the data, stores it into every node peer's receive buffer
    and bumps the peer's flag (the intra role's way), and pushes one PUT per rail peer in another node
    (the send role's way, through the proxy). Then it waits for the same chunks from every source and
    checks them. ``recv_ptrs`` / ``flag_bases``: per rank, this process's address of that rank's
    receive buffer and flags (world * shard_bytes, world * n_chunks), 0 where not mapped."""
    epoch = tl.load(epoch_ptr, volatile=True) + 1
    grid = tl.num_programs(0)
    node = rank // gpn
    local = rank % gpn
    world = nodes * gpn
    n_chunks = shard_bytes // chunk_bytes
    words = chunk_bytes // 4
    shard_words = shard_bytes // 4
    for c in range(tl.program_id(0), n_chunks, grid):
        w0 = c * words
        _fill(send, w0, words, rank, epoch, BLOCK)
        for g in range(gpn):  # intra-node: peer stores, then the peer's flag
            peer = node * gpn + g
            if peer != rank:
                dst = _raw(tl.load(recv_ptrs + peer), tl.int32) + rank.to(tl.int64) * shard_words
                _fill(dst, w0, words, rank, epoch, BLOCK)
                tl.debug_barrier()
                _bump(flag_bases, peer, rank * n_chunks + c, rank)
        tl.debug_barrier()
        for n in range(nodes):  # inter-node: one command per rail peer, the proxy moves it
            if (n != node) & _ok(err32):
                _push(PUT, n * gpn + local, rank * n_chunks + c, chunk_bytes.to(tl.int64), c.to(tl.int64) * chunk_bytes,
                      rank.to(tl.int64) * shard_bytes + c.to(tl.int64) * chunk_bytes, epoch, records, ctl, head,
                      capacity, -1, rank, timeout_ns, err32, err64)
    own_flags = tl.load(flag_bases + rank)
    own_recv = _raw(tl.load(recv_ptrs + rank), tl.int32)
    for src in range(world):
        if (src != rank) & ((src // gpn == node) | (src % gpn == local)):
            for c in range(tl.program_id(0), n_chunks, grid):
                if _ok(err32):
                    idx = src * n_chunks + c
                    _wait(own_flags + 8 * idx, epoch, idx, epoch, -1, rank, ROLE_RECV, timeout_ns, err32, err64, ctl)
                    if _ok(err32):
                        bad = _mismatches(own_recv + src.to(tl.int64) * shard_words, c * words, words, src, epoch,
                                          BLOCK)
                        if bad > 0:
                            tl.atomic_add(mism, bad)
    if _last_block(done_ptr, grid):
        tl.store(done_ptr, 0)
        tl.store(epoch_ptr, epoch)


_RING = {"records": "i64", "ctl": "i64", "head": "*i64", "capacity": "i64"}
_ERR = {"err32": "*i32", "err64": "*i64", "timeout_ns": "i64"}
_EPOCH = {"epoch_ptr": "*i64", "done_ptr": "*i32"}
SIGNATURES = {  # (kernel, signature, constexprs) for compiling without a GPU (CI's compile check)
    "epochs": (epochs_kernel, {"flag_bases": "*i64", "data": "*i32", "n_chunks": "i32", "chunk_words": "i32", **_EPOCH,
                               "mism": "*i32", **_ERR, "delay_ns": "i64"}, {"BLOCK": WORDS}),
    "timeout": (timeout_kernel, {"flag_addr": "i64", "index": "i32", "target": "i64", "rank": "i32", "role": "i32",
                                 **_ERR, "ctl": "i64"}, {}),
    "roundtrip": (roundtrip_kernel, {**_RING, "dst_flag": "i64", "dst_rank": "i32", "n_iters": "i32", "kind": "i32",
                                     "nbytes": "i64", "base": "i64", "lat": "*i64", **_ERR}, {}),
    "stream": (stream_kernel, {**_RING, "send": "*i32", "dst_flags": "i64", "dst_rank": "i32", "kind": "i32",
                               "chunks_per_block": "i32", "chunk_bytes": "i32", **_EPOCH, "times": "*i64", **_ERR},
               {"BLOCK": WORDS}),
    "exchange": (exchange_kernel, {"rank": "i32", "nodes": "i32", "gpn": "i32", "send": "*i32", "recv_ptrs": "*i64",
                                   "flag_bases": "*i64", "shard_bytes": "i32", "chunk_bytes": "i32", **_RING, **_EPOCH,
                                   "mism": "*i32", **_ERR}, {"BLOCK": WORDS}),
}
