"""GPU checks and measurements of the hw runtime. The device side is the fused kernel's own protocol
code (:mod:`mkernel.hw.kernels.sync`: bounded waits, the ring producer, signals, epochs), driven
by the kernels of :mod:`ring_kernels`.

Each function runs on the GPU at hand and returns a dict of what it measured; the GPU tests assert
on those dicts, ``tools/bench/bench_proxy.py`` tabulates them, and ``exchange_rank`` runs inside every rank
of an emulated cluster (see :mod:`mkernel.hw.runtime.emulate`).
"""
from __future__ import annotations

import time

import numpy as np

from ..knobs import DEFAULTS
from ..lowering import ring
from ..runtime.emulate import RankInfo, launch
from ..runtime.proxy import Proxy, ProxyError, Regions
from ..runtime.state import DeviceRing, Epoch, ErrorBlock
from ..runtime.transports import Shaping, resolve

NUM_WARPS = 8  # the fused kernel's (fused.NUM_WARPS): a block of 256 threads


def _run(name: str, grid: int, *args, num_warps: int = NUM_WARPS) -> None:
    """Launch ``ring_kernels.<name>_kernel`` on torch's current stream (Triton's launch), so stream
    order with torch work holds and a CUDA graph can capture it."""
    from . import ring_kernels

    kernel, _, const = ring_kernels.SIGNATURES[name]
    kernel[(grid,)](*args, **const, num_warps=num_warps)


def _table(*addresses: int, device="cuda"):
    """A device int64 table of addresses (the fused kernel's ``flag_bases`` form)."""
    import torch

    return torch.tensor(addresses, dtype=torch.int64, device=device)


def _busy_until(event, busy: bool, what: str, limit_s: float) -> int:
    """Keep the Python main thread busy (holding the GIL) until ``event`` completes; return loop count.
    Bounded: the kernel's own waits stop after their timeout, so a call still running after ``limit_s``
    is a defect, reported as one instead of a hang."""
    n, deadline = 0, time.monotonic() + limit_s
    while not event.query():
        if time.monotonic() > deadline:
            raise TimeoutError(f"selftest {what}: the kernel still runs after {limit_s:.0f} s (its waits are "
                               f"bounded by the pair's timeout): the ring or the proxy is stuck")
        if busy:
            sum(i * i for i in range(2000))  # pure-Python work: the GIL stays taken
        n += 1
    return n


def check_epochs(n_epochs: int = 70_000, n_chunks: int = 4, chunk_words: int = 1024, delay_ns: int = 1000,
                 timeout_s: float = 2.0) -> dict:
    """``n_epochs`` launches of a producer/consumer pair that never zero their flags."""
    import torch

    dev = torch.device("cuda")
    flags = torch.zeros(n_chunks, dtype=torch.int64, device=dev)
    data = torch.randint(0, 2**31, (n_chunks * chunk_words,), dtype=torch.int32, device=dev)  # poison
    mism = torch.zeros(1, dtype=torch.int32, device=dev)
    epoch, err = Epoch(dev), ErrorBlock(dev)
    args = (_table(flags.data_ptr()), data, n_chunks, chunk_words, *epoch.kernel_args(), mism, *err.kernel_args(),
            int(timeout_s * 1e9), delay_ns)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n_epochs):
        _run("epochs", 2, *args)
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    failure = err.read()
    return {"epochs": n_epochs, "final_epoch": epoch.current(), "mismatches": int(mism.item()),
            "flags": flags.tolist(), "error": str(failure) if failure else None, "us_per_epoch": wall / n_epochs * 1e6}


def check_timeout(timeout_s: float = 0.002) -> dict:
    """A wait nothing satisfies must stop after ``timeout_s`` and name rank, role, flag and epoch;
    with the proxy's abort word set, it must stop early as aborted."""
    import torch

    dev = torch.device("cuda")
    flags = torch.zeros(8, dtype=torch.int64, device=dev)
    ctl = torch.zeros(ring.CTL_WORDS, dtype=torch.int64, pin_memory=True)
    out = {}
    for case in ("timeout", "abort"):
        err = ErrorBlock(dev)
        ctl[ring.CTL_ABORT] = 0 if case == "timeout" else ring.ERR_ABORTED
        t0 = time.perf_counter()
        _run("timeout", 1, flags.data_ptr(), 5, 42, 3, ring.ROLE_RECV, *err.kernel_args(),
             int(timeout_s * 1e9) if case == "timeout" else 10**10, ctl.data_ptr(), num_warps=1)
        torch.cuda.synchronize()
        out[case] = {"error": str(err.read()), "failure": err.read(), "wall_s": time.perf_counter() - t0}
    return out


class LocalPair:
    """Rank 0 sending to rank 1 in one process: rank 1's receive buffer and flags are plain device
    memory. The ring, the proxy and the loopback transport are the real ones.

    With ``host_flags`` the flags live in pinned host memory and the proxy thread sets them itself
    (the in-process host transport, SIGNAL commands only): the proxy's own path with no CUDA driver
    call, as when it returns send completions or credits to the GPU.
    """

    def __init__(self, n_flags: int, buf_bytes: int, capacity: int = DEFAULTS.ring_capacity,
                 shaping: Shaping | None = None, window_us: float = DEFAULTS.window_us,
                 timeout_s: float = DEFAULTS.timeout_s, host_flags: bool = False, cpu: int = -1,
                 max_batch: int = ring.MAX_BATCH):
        import torch

        dev = torch.device("cuda")
        self.send = torch.zeros(buf_bytes // 4, dtype=torch.int32, device=dev)
        self.recv = torch.zeros(buf_bytes // 4, dtype=torch.int32, device=dev)
        self.flags = (torch.zeros(n_flags, dtype=torch.int64, pin_memory=True) if host_flags
                      else torch.zeros(n_flags, dtype=torch.int64, device=dev))
        self.ring, self.epoch, self.err = DeviceRing(capacity, dev), Epoch(dev), ErrorBlock(dev)
        self.timeout_ns = int(timeout_s * 1e9)
        native, opts = resolve("fake" if host_flags else "loopback", shaping)
        regions = Regions((self.send.data_ptr(), buf_bytes), ((0, 0), (self.recv.data_ptr(), buf_bytes)),
                          (0, self.flags.data_ptr()), n_flags)
        self.proxy = Proxy(rank=0, nranks=2, ring_ptr=self.ring.ring_ptr, ctl_ptr=self.ring.ctl_ptr,
                           capacity=capacity, regions=regions, transport=native, window_us=window_us,
                           device=dev.index or 0, cpu=cpu, max_batch=max_batch, **opts).start()

    def call_limit_s(self, commands: int) -> float:
        """How long a call of ``commands`` ring commands (every block's: one proxy serves them in
        turn) may run before the host calls it stuck: a failed wait takes one timeout and the ones
        after it stop on its record, so three timeouts, plus a millisecond a command (a thousand times
        the proxy's rate) and ten seconds for a first launch's compile."""
        return 3 * self.timeout_ns / 1e9 + commands * 1e-3 + 10.0

    def close(self) -> dict:
        """Stop the proxy; its counters, plus 'error' with the proxy's error message or None."""
        try:
            self.proxy.stop()
            error = None
        except ProxyError as exc:
            error = str(exc)
        stats = {**self.proxy.stats(), "error": error}
        self.proxy.close()
        return stats


def roundtrip(n: int = 20_000, nbytes: int = 64, busy_main: bool = False, buf_bytes: int | None = None,
              signal_only: bool = False, host_flags: bool = False, cpu: int = -1) -> dict:
    """Enqueue -> proxy -> copy + flag -> flag seen on the GPU, one command at a time. With
    ``signal_only`` the commands are SIGNALs (no copy engine); with ``host_flags`` also no driver
    call; ``cpu`` pins the proxy thread."""
    import torch

    signal_only = signal_only or host_flags
    pair = LocalPair(n_flags=1, buf_bytes=buf_bytes or max(nbytes, 256), host_flags=host_flags, cpu=cpu)
    lat = torch.zeros(n, dtype=torch.int64, device="cuda")
    done = torch.cuda.Event()
    _run("roundtrip", 1, *pair.ring.kernel_args(), pair.flags.data_ptr(), 1, n, ring.SIGNAL if signal_only else ring.PUT,
         nbytes, 0, lat, *pair.err.kernel_args(), pair.timeout_ns, num_warps=1)
    done.record()
    loops = _busy_until(done, busy_main, f"roundtrip of {n} commands", pair.call_limit_s(n))
    torch.cuda.synchronize()
    stats = pair.close()
    failure = pair.err.read()
    us = lat.cpu().numpy() / 1e3
    ok = us[us > 0]
    return {"n": n, "bytes": nbytes, "busy_main": busy_main, "signal_only": signal_only, "host_flags": host_flags,
            "cpu": cpu, "main_loops": loops, "completed": int(ok.size),
            "p50_us": float(np.percentile(ok, 50)) if ok.size else None,
            "p99_us": float(np.percentile(ok, 99)) if ok.size else None,
            "p999_us": float(np.percentile(ok, 99.9)) if ok.size else None,
            "max_us": float(ok.max()) if ok.size else None,  # includes the proxy thread's start-up
            "max_after_100_us": float(ok[100:].max()) if ok.size > 100 else None, "error": str(failure) if failure else None,
            "proxy": stats}


def stream(n_blocks: int = 64, chunks_per_block: int = 256, chunk_bytes: int = 64, epochs: int = 3,
           busy_main: bool = False, shaping: Shaping | None = None, capacity: int = 4096,
           signal_only: bool = False, host_flags: bool = False, max_batch: int = ring.MAX_BATCH,
           timeout_s: float = DEFAULTS.timeout_s) -> dict:
    """Many device producers at once: commands per second through ring + proxy + loopback, and the
    data and flags checked after every epoch (receive buffer poisoned before each). ``max_batch``
    caps the commands the proxy submits per connection at once."""
    import torch

    n_chunks = n_blocks * chunks_per_block
    signal_only = signal_only or host_flags
    pair = LocalPair(n_flags=n_chunks, buf_bytes=n_chunks * chunk_bytes, capacity=capacity, shaping=shaping,
                     host_flags=host_flags, max_batch=max_batch, timeout_s=timeout_s)
    times = torch.zeros(4, dtype=torch.int64, device="cuda")
    rates, bad, loops, push_s, wait_s = [], 0, 0, 0.0, 0.0
    for e in range(1, epochs + 1):
        pair.recv.fill_(-1)
        times.zero_()
        times[0] = 2**63 - 1
        done = torch.cuda.Event()
        _run("stream", n_blocks, *pair.ring.kernel_args(), pair.send, pair.flags.data_ptr(), 1,
             ring.SIGNAL if signal_only else ring.PUT, chunks_per_block, chunk_bytes, *pair.epoch.kernel_args(), times,
             *pair.err.kernel_args(), pair.timeout_ns)
        done.record()
        loops += _busy_until(done, busy_main, f"stream, epoch {e}", pair.call_limit_s(n_chunks))
        torch.cuda.synchronize()
        t = times.tolist()
        rates.append(n_chunks / ((t[1] - t[0]) / 1e9))
        push_s, wait_s = push_s + t[2] / 1e9 / n_blocks, wait_s + t[3] / 1e9 / n_blocks
        if not signal_only:
            bad += int((pair.recv != pair.send).sum().item())
        bad += int((pair.flags != e).sum().item())
    stats = pair.close()
    failure = pair.err.read()
    return {"commands": n_chunks * epochs, "chunk_bytes": chunk_bytes, "busy_main": busy_main,
            "signal_only": signal_only, "host_flags": host_flags, "push_s_per_block": push_s / epochs, "wait_s_per_block": wait_s / epochs,
            "cmds_per_s": float(np.median(rates)), "mismatches": bad, "final_epoch": pair.epoch.current(),
            "error": str(failure) if failure else None, "proxy": stats, "main_loops": loops}


def check_graph(replays: int = 200, n_blocks: int = 8, chunks_per_block: int = 16, chunk_bytes: int = 1024) -> dict:
    """Capture one ring+proxy call in a CUDA graph after a warm-up call, replay it: epochs advance
    in-kernel and the host never synchronises, so every replay is a fresh call."""
    import torch

    n_chunks = n_blocks * chunks_per_block
    pair = LocalPair(n_flags=n_chunks, buf_bytes=n_chunks * chunk_bytes)
    times = torch.zeros(4, dtype=torch.int64, device="cuda")
    args = (*pair.ring.kernel_args(), pair.send, pair.flags.data_ptr(), 1, ring.PUT, chunks_per_block, chunk_bytes,
            *pair.epoch.kernel_args(), times, *pair.err.kernel_args(), pair.timeout_ns)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        _run("stream", n_blocks, *args)  # warm-up call: epoch 1 (and the compile)
        stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            _run("stream", n_blocks, *args)
        pair.recv.fill_(-1)
        t0 = time.perf_counter()
        for _ in range(replays):
            graph.replay()
        stream.synchronize()
        wall = time.perf_counter() - t0
    stats = pair.close()
    failure = pair.err.read()
    return {"replays": replays, "final_epoch": pair.epoch.current(),
            "flags_ok": bool((pair.flags == 1 + replays).all().item()),
            "data_ok": bool((pair.recv == pair.send).all().item()), "error": str(failure) if failure else None,
            "proxy": stats, "us_per_replay": wall / replays * 1e6}


def exchange_rank(info: RankInfo, nodes: int, gpn: int, shard_bytes: int, chunk_bytes: int, epochs: int,
                  shaping: Shaping | None) -> dict:
    """One rank of the emulated-cluster exchange (runs inside a rank process)."""
    import torch
    import torch.distributed as dist

    from ..runtime.context import Context

    world = nodes * gpn
    n_chunks = shard_bytes // chunk_bytes
    with Context(None, gpus_per_node=gpn, send_bytes=shard_bytes, recv_bytes=world * shard_bytes,
                 n_flags=world * n_chunks, transport="loopback", shaping=shaping) as ctx:
        mism = torch.zeros(1, dtype=torch.int32, device=ctx.device)
        send = ctx.send.view(torch.int32)  # the kernels move int32 words
        grid = max(1, min(n_chunks, info.sm_budget))
        t0 = time.perf_counter()
        for _ in range(epochs):
            _run("exchange", grid, info.rank, nodes, gpn, send, ctx.recv_ptrs, ctx.flag_ptrs, shard_bytes, chunk_bytes,
                 *ctx.ring.kernel_args(), *ctx.epoch.kernel_args(), mism, *ctx.errors.kernel_args(), ctx.timeout_ns)
            torch.cuda.synchronize()
            dist.barrier()  # send areas are rewritten next epoch only after every rank has its data
        wall = time.perf_counter() - t0
        failure = ctx.errors.read()
        ctx.proxy.check()
        stats = ctx.proxy.stats()
        return {"rank": info.rank, "node": ctx.node, "epochs": epochs, "final_epoch": ctx.epoch.current(),
                "mismatches": int(mism.item()), "error": str(failure) if failure else None, "proxy": stats,
                "sm_budget": info.sm_budget, "grid": grid, "wall_s": wall,
                "multicast_ptr": int(ctx.handle.multicast_ptr)}


def check_exchange(nodes: int = 2, gpn: int = 2, shard_bytes: int = 1 << 20, chunk_bytes: int = 64 << 10,
                   epochs: int = 20, shaping: Shaping | None = None) -> list[dict]:
    """The exchange on an emulated ``nodes`` x ``gpn`` cluster on the GPUs at hand."""
    from ..runtime import native

    native.build()  # once here, not racing in every rank
    return launch(exchange_rank, nodes * gpn, args=(nodes, gpn, shard_bytes, chunk_bytes, epochs, shaping))


def summary(nodes: int = 2, gpn: int = 2, shaped: bool = False) -> list[tuple[str, bool, str]]:
    """Every runtime check on the GPUs at hand, as (check, passed, detail) rows for ``mkernel selftest``.
    The exchange runs first, before this process touches CUDA (MPS starts cleanly then)."""
    shaping = Shaping(gbytes_per_s=50.0, latency_us=5.0, unordered=True, seed=1) if shaped else None
    rows = []
    ex = check_exchange(nodes, gpn, shard_bytes=1 << 18, chunk_bytes=16 << 10, epochs=100, shaping=shaping)
    bad = [r for r in ex if r["error"] or r["mismatches"] or r["final_epoch"] != 100]
    rows.append((f"exchange on {nodes}x{gpn} ranks, 100 epochs", not bad,
                 f"{sum(r['proxy']['commands'] for r in ex)} ring commands; "
                 + ("; ".join(str(r["error"] or f"rank {r['rank']}: {r['mismatches']} bad words") for r in bad)
                    or "every chunk checked")))
    ep = check_epochs(n_epochs=70_000)
    rows.append(("70000 epochs without zeroing flags", ep["error"] is None and ep["mismatches"] == 0
                 and ep["final_epoch"] == 70_000, f"{ep['us_per_epoch']:.1f} us per call; {ep['error'] or 'clean'}"))
    g = check_graph(replays=200)
    rows.append(("ring call replayed from a CUDA graph", g["error"] is None and g["flags_ok"] and g["data_ok"],
                 f"{g['us_per_replay']:.1f} us per replay; final epoch {g['final_epoch']}"))
    t = check_timeout()
    rows.append(("bounded wait times out and names its flag", t["timeout"]["failure"] is not None,
                 t["timeout"]["error"]))
    return rows
