"""One rank of a fused op on hw: what `mkernel run --backend hw`, the GPU tests and the benchmarks
run inside every rank process (see :func:`mkernel.hw.emulate.launch`).

The rank builds the same schedule as every other rank (for the SMs it may use), draws the seeded
inputs of every rank (so each rank can compute the oracle without communication), rounds them to
bf16, runs the fused kernel ``calls`` times with outputs poisoned with NaN before each call, and
compares the last call's outputs with the float64 oracle of the rounded inputs. Timed calls follow,
unpoisoned, with CUDA events.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from mkernel import builders, reference
from mkernel.cluster import Cluster
from mkernel.problems import Workload

from .emulate import RankInfo

TOLERANCE = 1e-2  # bf16 inputs and outputs, fp32 accumulation: ||out - ref|| / ||ref||


def cluster_for(info: RankInfo, nodes: int, gpus_per_node: int, name: str = "hw") -> Cluster:
    """The cluster the schedule is built for: the rank's SM budget is its GPU's SM count."""
    base = Cluster(name, nodes, gpus_per_node)
    return dataclasses.replace(base, gpu=dataclasses.replace(base.gpu, sms=info.sm_budget))


def run_rank(info: RankInfo, w: Workload, nodes: int, gpus_per_node: int, seed: int = 0, calls: int = 3,
             timed: int = 0, timeout_s: float = 5.0, transport: str = "loopback", shaping=None) -> dict:
    import torch

    from .context import Context
    from .executor import Executor

    c = cluster_for(info, nodes, gpus_per_node)
    module = builders.get(w.kernel)
    schedule = module.build(w, c)
    arrays = module.make_inputs(w, c, np.random.default_rng(seed))
    dev = torch.device("cuda", torch.cuda.current_device())
    ranked = {name: [torch.from_numpy(a).to(dev).bfloat16() for a in per_rank] for name, per_rank in arrays.items()}
    rounded = {name: [t.float().cpu().numpy() for t in per_rank] for name, per_rank in ranked.items()}
    expected = reference.expected(w, rounded, gpus_per_node)
    inputs = {name: per_rank[info.rank].contiguous() for name, per_rank in ranked.items()}
    sizes = Executor.context_sizes(schedule)
    with Context(None, gpus_per_node=gpus_per_node, send_bytes=0, timeout_s=timeout_s, transport=transport,
                 shaping=shaping, **sizes) as ctx:
        op = Executor(schedule, ctx, timeout_s=timeout_s)
        outs = {}
        for _ in range(calls):
            outs = op(inputs, poison=True)
        op.check()
        errors, unwritten = {}, {}
        for name, refs in expected.items():
            got = outs[name].float().cpu().numpy().astype(np.float64)
            unwritten[name] = int(np.isnan(got).sum())
            errors[name] = reference.relative_error(got, refs[info.rank])
        times = []
        if timed:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            for _ in range(timed):
                start.record()
                op(inputs)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) * 1e-3)
            op.check()
        return {"rank": info.rank, "errors": errors, "unwritten": unwritten, "epoch": int(op.epoch.item()),
                "grid": op.plan.grid, "blocks": op.plan.blocks, "sm_budget": info.sm_budget,
                "ok": all(e <= TOLERANCE for e in errors.values()) and not any(unwritten.values()),
                "time_s": float(np.median(times)) if times else None, "times_s": times}
