"""NVLink microbenchmarks for `mkernel calibrate` on a host with two or more GPUs.

The simulator charges an intra-node transfer of b bytes by SMs as min(port share, SMs x
``nvlink.sm_copy_gb_per_s``) at an efficiency b / (b + ``half_efficiency_bytes``), plus
``latency_us``. These measure exactly those terms the way the fused kernel's intra role moves data:
SMs storing into a peer GPU's memory (no copy engine), a release store of a flag after each message.

- ``copy``: one GPU's blocks copy 256 MiB into the peer on 1..132 blocks (the per-SM rate from the
  few-block points, the port bandwidth from the most);
- ``bidir``: both GPUs copy into each other at once on 32 blocks and on every SM (a ring step);
- ``messages``: one block sends messages of 4 KiB..4 MiB, each followed by its flag: time per
  message = cost + bytes / rate, whose ratio is the half-efficiency size;
- ``pingpong``: two single-block kernels bounce a flag; half the round trip is the latency.

Kernels run on GPU 0 and 1 of one process with peer access enabled, addresses passed as integers.
Everything is timed as CUDA-graph replays or between CUDA events, never with host sleeps.
"""
from __future__ import annotations

import statistics

import triton
import triton.language as tl

from ..kernels.sync import _clock, _ld_acquire, _raw, _st_release64

COPY_PROGRAMS = (1, 2, 4, 8, 16, 32, 66, 132)
MESSAGE_BYTES = (4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20)
BLOCK = 2048  # int64 words per block per step: 16 KiB


@triton.jit
def peer_copy_kernel(src, dst_addr, n, BLOCK: tl.constexpr, NUM_PROGRAMS: tl.constexpr):
    """peer[:n] = src[:n] (int64 words, n a multiple of BLOCK), a strided walk by NUM_PROGRAMS blocks."""
    dst = _raw(dst_addr, tl.int64)
    offs = tl.arange(0, BLOCK)
    for start in range(tl.program_id(0) * BLOCK, n, NUM_PROGRAMS * BLOCK):
        tl.store(dst + start + offs, tl.load(src + start + offs))


@triton.jit
def message_kernel(src, dst_addr, flag_addr, words, count, BLOCK: tl.constexpr):
    """Block p sends ``count`` messages of ``words`` words into its own slab of the peer, each followed
    (after a block barrier) by a system-scope release store of its flag, as the intra role publishes."""
    pid = tl.program_id(0)
    dst = _raw(dst_addr, tl.int64) + pid * words
    mine = src + pid * words
    offs = tl.arange(0, BLOCK)
    for i in range(count):
        for start in range(0, words, BLOCK):
            mask = start + offs < words
            tl.store(dst + start + offs, tl.load(mine + start + offs, mask=mask), mask=mask)
        tl.debug_barrier()
        _st_release64(flag_addr + 8 * pid, i + 1)


@triton.jit
def pingpong_kernel(my_flag_addr, peer_flag_addr, iters, timeout_ns, done, FIRST: tl.constexpr):
    """Bounce a counter between two GPUs ``iters`` times; ``done`` gets the rounds completed (fewer
    than ``iters`` when the peer did not answer within ``timeout_ns``)."""
    start = _clock()
    i = 0
    going = True
    while going & (i < iters):
        if FIRST:
            _st_release64(peer_flag_addr, i + 1)
        while going & (_ld_acquire(my_flag_addr) < i + 1):
            going = _clock() - start < timeout_ns
        if not FIRST:
            _st_release64(peer_flag_addr, i + 1)
        i += 1
    tl.store(done, tl.where(going, i, i - 1))


def enable_peer_access(a: int, b: int) -> None:
    """Let GPU ``a`` load and store GPU ``b``'s memory and the reverse: ``cuCtxEnablePeerAccess``
    between the primary contexts torch uses (libcuda by ctypes, as hw/runtime/packed.py loads its
    launch). Raises with the reason when the GPUs have no peer path."""
    import ctypes

    import torch

    if not torch.cuda.can_device_access_peer(a, b):
        raise RuntimeError(f"GPU {a} cannot access GPU {b}'s memory (no NVLink or PCIe peer path)")
    lib = ctypes.CDLL("libcuda.so.1")
    already = 704  # CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
    for x, y in ((a, b), (b, a)):
        torch.cuda.init()
        with torch.cuda.device(y):
            torch.cuda.synchronize()  # y's primary context exists and is current
            peer = ctypes.c_void_p()
            if lib.cuCtxGetCurrent(ctypes.byref(peer)) or not peer.value:
                raise RuntimeError(f"GPU {y} has no current CUDA context to enable peer access to")
        with torch.cuda.device(x):
            torch.cuda.synchronize()
            rc = lib.cuCtxEnablePeerAccess(peer, ctypes.c_uint(0))
        if rc not in (0, already):
            raise RuntimeError(f"cuCtxEnablePeerAccess from GPU {x} to GPU {y} failed with CUresult {rc}")


def _bench(fn, rep_ms: int = 60) -> float:
    from triton.testing import do_bench_cudagraph

    fn()
    return do_bench_cudagraph(fn, rep=rep_ms) * 1e-3


def copy(nbytes: int = 256 << 20) -> list[dict]:
    """GB/s of GPU 0's blocks storing into GPU 1 against the number of blocks; each output checked."""
    import torch

    words = nbytes // 8
    src = torch.empty(words, device="cuda:0", dtype=torch.int64).random_()
    rows = []
    for programs in COPY_PROGRAMS:
        dst = torch.full((words,), -1, device="cuda:1", dtype=torch.int64)
        launch = lambda: peer_copy_kernel[(programs,)](src, dst.data_ptr(), words, BLOCK=BLOCK,  # noqa: E731
                                                       NUM_PROGRAMS=programs)
        launch()
        torch.cuda.synchronize(0)
        ok = bool(torch.equal(dst.cpu(), src.cpu()))
        rows.append({"programs": programs, "gb_per_s": nbytes / _bench(launch) / 1e9, "checked": ok})
    return rows


def bidir(nbytes: int = 256 << 20, reps: int = 10) -> list[dict]:
    """Both GPUs store into each other at once (what a ring step does), on 32 blocks and on every SM:
    GB/s per direction, from CUDA events on each GPU around its ``reps`` launches."""
    import torch

    words = nbytes // 8
    bufs = [(torch.empty(words, device=f"cuda:{d}", dtype=torch.int64).random_(),
             torch.empty(words, device=f"cuda:{d}", dtype=torch.int64)) for d in (0, 1)]
    rows = []
    for programs in (32, torch.cuda.get_device_properties(0).multi_processor_count):
        events = []
        for _ in range(2):  # the first pass loads the kernel on both GPUs
            events = []
            for d in (0, 1):
                torch.cuda.synchronize(d)
            for d in (0, 1):
                with torch.cuda.device(d):
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    for _ in range(reps):
                        peer_copy_kernel[(programs,)](bufs[d][0], bufs[1 - d][1].data_ptr(), words, BLOCK=BLOCK,
                                                      NUM_PROGRAMS=programs)
                    end.record()
                    events.append((start, end))
            for d in (0, 1):
                torch.cuda.synchronize(d)
        ok = all(torch.equal(bufs[d][0].cpu(), bufs[1 - d][1].cpu()) for d in (0, 1))
        secs = [s.elapsed_time(e) * 1e-3 for s, e in events]
        rows.append({"programs": programs, "gb_per_s_each_way": reps * nbytes / max(secs) / 1e9,
                     "per_gpu_gb_per_s": [reps * nbytes / t / 1e9 for t in secs], "checked": ok})
    return rows


def messages(programs: int = 1, total_bytes: int = 32 << 20) -> list[dict]:
    """Microseconds per flagged message of each size on ``programs`` blocks (each its own slab)."""
    import torch

    rows = []
    for nbytes in MESSAGE_BYTES:
        words = nbytes // 8
        count = max(8, total_bytes // nbytes)
        src = torch.empty(programs * words, device="cuda:0", dtype=torch.int64).random_()
        dst = torch.full_like(src, -1, device="cuda:1")
        flags = torch.zeros(programs, device="cuda:1", dtype=torch.int64)
        launch = lambda: message_kernel[(programs,)](src, dst.data_ptr(), flags.data_ptr(), words, count,  # noqa: E731
                                                     BLOCK=BLOCK)
        t = _bench(launch)
        ok = bool(torch.equal(dst.cpu(), src.cpu())) and bool((flags.cpu() == count).all())
        rows.append({"bytes": nbytes, "programs": programs, "count": count, "us_per_message": t / count * 1e6,
                     "checked": ok})
    return rows


def pingpong(iters: int = 20000, timeout_s: float = 10.0) -> dict:
    """One-way latency of a flag store between the two GPUs: half the mean round trip."""
    import torch

    flags = [torch.zeros(1, device=f"cuda:{d}", dtype=torch.int64) for d in (0, 1)]
    done = [torch.zeros(1, device=f"cuda:{d}", dtype=torch.int64) for d in (0, 1)]

    def bounce(n: int) -> float:
        for f in flags:
            f.zero_()
        for d in (0, 1):
            torch.cuda.synchronize(d)
        with torch.cuda.device(1):  # the responder first: it waits for the first ping
            pingpong_kernel[(1,)](flags[1].data_ptr(), flags[0].data_ptr(), n, int(timeout_s * 1e9), done[1],
                                  FIRST=False)
        with torch.cuda.device(0):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            pingpong_kernel[(1,)](flags[0].data_ptr(), flags[1].data_ptr(), n, int(timeout_s * 1e9), done[0],
                                  FIRST=True)
            end.record()
        for d in (0, 1):
            torch.cuda.synchronize(d)
        finished = [int(x.item()) for x in done]
        if finished != [n, n]:
            raise RuntimeError(f"pingpong between GPU 0 and 1 stopped after {finished} of {n} rounds "
                               f"(no answer within {timeout_s} s)")
        return start.elapsed_time(end) * 1e-3

    bounce(10)  # compiles both variants
    runs = [bounce(iters) for _ in range(3)]
    return {"iters": iters, "one_way_us": statistics.median(runs) / iters / 2 * 1e6}


def run(progress=print) -> dict:
    """Every peer microbenchmark between GPU 0 and GPU 1."""
    import torch

    torch.cuda.set_device(0)
    enable_peer_access(0, 1)
    out = {"gpus": torch.cuda.device_count()}
    for name, fn in (("copy", copy), ("bidir", bidir), ("messages", messages), ("pingpong", pingpong)):
        progress(f"calibrate: peer {name}")
        out[name] = fn()
    return out
