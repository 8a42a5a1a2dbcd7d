"""Issue 10's long run, in each rank process: many consecutive calls mixing the fused ops on one set
of executors, every output checked on the GPU, memory, open files and threads compared before and
after (``tools/studies/long_run.py`` launches it on the emulated cluster and judges what it returns)."""
from __future__ import annotations

from mkernel import builders
from mkernel.errors import MkernelError
from mkernel.hw.rank import cluster_for
from mkernel.hw.runtime.emulate import RankInfo

from .rank import _draw

INPUT_SETS = 3  # input sets each op's calls of the long run take turns over


def long_run_rank(info: RankInfo, cases: dict, nodes: int, gpus_per_node: int, calls: int,
                  sync_every: int = 0) -> dict:
    """``calls`` consecutive calls cycling through the ops of ``cases`` (name -> Workload) on one
    set of executors, every output checked on the GPU against the oracle; each op's consecutive
    calls take turns over ``INPUT_SETS`` input sets, so a read of the previous call's data shows
    (fresh inputs per call would need an oracle per call on the CPU); memory, open files and
    threads sampled before, halfway and after (issue 10's long run): the executors' address-table
    caches (up to 16 tables each, as output tensors land at new addresses) fill in the first calls,
    so memory growth is judged over the second half. ``sync_every``: the host waits for the GPU
    after every that many calls (0: never; on the emulated cluster each call returns finished anyway)."""
    import math
    import os
    import sys
    import threading
    import time

    import torch

    from mkernel.hw.runtime.context import Context
    from mkernel.hw.runtime.executor import Executor

    c = cluster_for(info, nodes, gpus_per_node)
    dev = torch.device("cuda", torch.cuda.current_device())
    ops = []
    for name, w in cases.items():
        schedule = builders.get(w.kernel).build(w, c)
        sets = []
        for k in range(INPUT_SETS):
            inputs, refs = _draw(info, w, c, 17 + k)
            sets.append((inputs, {n: torch.from_numpy(r[info.rank]).to(dev).float() for n, r in refs.items()}))
        ctx = Context(None, gpus_per_node=gpus_per_node, send_bytes=0, **Executor.context_sizes(schedule))
        ops.append((name, ctx, Executor(schedule, ctx), sets))

    def sample() -> dict:
        return {"allocated": torch.cuda.memory_allocated(dev), "fds": len(os.listdir("/proc/self/fd")),
                "threads": threading.active_count()}

    warmup = {"start": time.time()}  # ranks' skew, and how long the first calls (compiles) took
    for name, _, op, sets in ops:  # warm up: first calls allocate caches (an address table per input set)
        for inputs, _ in sets:
            op(inputs)
        torch.cuda.synchronize()
        warmup[name] = time.time() - warmup["start"]
    # the worst error per op stays on the GPU (a NaN output makes it NaN): no host sync per call
    worst = {name: torch.zeros((), device=dev) for name, *_ in ops}
    before = middle = sample()
    t0 = time.perf_counter()
    for i in range(calls):
        if i % 1000 == 0 and info.rank == 0:  # progress, so a run cut short by its limit shows its rate
            print(f"long run: call {i} at {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
        name, _, op, sets = ops[i % len(ops)]
        inputs, expected = sets[i // len(ops) % INPUT_SETS]
        if i == calls // 2:
            outs = None  # as at the end: no call's outputs alive when sampled
            middle = sample()
        outs = op(inputs, poison=True)
        for n, ref in expected.items():
            torch.maximum(worst[name], (outs[n].float() - ref).norm() / ref.norm(), out=worst[name])
        if sync_every and (i + 1) % sync_every == 0:
            torch.cuda.synchronize()
    outs = None  # the last call's outputs, alive here, are no leak (the "before" sample had none)
    errors, transfers = {}, {}  # every op's first error on this rank, not just the first op's
    for name, ctx, op, _ in ops:
        try:
            op.check()
        except MkernelError as exc:
            errors[name] = str(exc)
        if ctx.proxy is not None:  # where a lost transfer stopped: claimed by the GPU, consumed, posted
            stats = ctx.proxy.stats()
            transfers[name] = {"claimed": int(ctx.ring.head[0].item()), "consumed": int(ctx.ring.ctl[0].item()),
                               **{k: stats[k] for k in ("commands", "batches", "driver_calls", "idle_sleeps")}}
    worst = {name: float("inf") if math.isnan(w.item()) else w.item() for name, w in worst.items()}
    after = sample()
    for _, ctx, *_ in ops:
        ctx.close()
    return {"rank": info.rank, "calls": calls, "worst_error": worst, "before": before, "middle": middle,
            "after": after,
            "epochs": {name: int(op.epoch.item()) for name, _, op, _ in ops}, "errors": errors,
            "transfers": transfers, "warmup": warmup}
