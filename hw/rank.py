"""One rank of a fused op on hw: what `mkernel run --backend hw` and `mkernel sweep --backend hw` run
inside every rank process (see :func:`mkernel.hw.runtime.emulate.launch`): the fused schedule
(:func:`schedule_rank`) or the op's torch fallback (:func:`fallback_rank`) on the inputs the caller
drew, three poisoned calls, then timed ones with CUDA events. The outputs go back to the caller,
which judges them against its oracle; the GPU tests' rank functions are in ``tests/harness/``.
"""
from __future__ import annotations

import numpy as np

from mkernel.cluster import Cluster
from mkernel.problems import Workload

from .runtime.emulate import RankInfo, rank_step


def cluster_for(info: RankInfo, nodes: int, gpus_per_node: int, name: str = "hw") -> Cluster:
    """The cluster the schedule is built for: the rank's SM budget is its GPU's SM count."""
    return Cluster(name, nodes, gpus_per_node).with_sms(info.sm_budget)


def _timed(fn, n: int) -> list[float]:
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(n):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return times


def median_s(fn, iters: int, warmup: int = 3) -> float:
    """Median of ``iters`` calls after ``warmup`` untimed ones, each timed alone (:func:`_timed`)."""
    for _ in range(warmup):
        fn()
    return float(np.median(_timed(fn, iters)))


def schedule_rank(info: RankInfo, schedule, gpus_per_node: int, timed: int = 10, controller=None,
                  cluster: Cluster | None = None, faults=None, transport: str = "loopback", heap: str = "device",
                  inputs: dict | None = None) -> dict:
    """The fused ``schedule`` on this rank (the hw backend's run) on its ``inputs`` (this rank's
    arrays by name): 3 poisoned calls, then timed ones. With a ``controller`` (the adaptive SM
    partition), also the last call's target trajectory; ``faults``: what the proxy injects;
    ``transport`` and ``heap``: the Context's."""
    import torch

    from .runtime.context import Context
    from .runtime.executor import Executor

    dev = torch.device("cuda", torch.cuda.current_device())
    mine = {name: torch.from_numpy(np.ascontiguousarray(a)).to(dev).bfloat16() for name, a in inputs.items()}
    with Context(None, gpus_per_node=gpus_per_node, send_bytes=0, faults=faults, transport=transport, heap=heap,
                 **Executor.context_sizes(schedule)) as ctx:
        op = Executor(schedule, ctx, controller=controller, cluster=cluster)
        for call in range(3):
            rank_step(f"fused call {call + 1} of 3 (poisoned outputs)")
            outs = op(mine, poison=True)
        op.check()
        result = {n: t.float().cpu().numpy() for n, t in outs.items()}
        rank_step(f"{timed} timed fused calls")
        times = _timed(lambda: op(mine, outs), timed)
        op.check()
        trajectory = op.trajectory() if controller is not None else None
    return {"rank": info.rank, "outputs": result, "time_s": float(np.median(times)), "trajectory": trajectory}


def fallback_fn(w: Workload, mine: dict, gpus_per_node: int):
    """A call of the op's torch fallback on this rank's bf16 inputs ``mine``, returning outputs by name."""
    from . import fallbacks
    from .groups import group_info

    if w.kernel == "ring_attention":
        shape = (1, w.n, w.m, w.k)

        def fn():
            out, lse = fallbacks.fallback_ring_attention(*(mine[n].view(shape) for n in "QKV"), causal=bool(w.causal))
            return {"OUT": out.reshape(w.n * w.m, w.k), "LSE": lse.reshape(w.n * w.m, 1)}
    elif w.kernel == "moe_dispatch_gemm":
        g = group_info(None)
        sources = fallbacks.moe_sources(w, g.rank, g.world // gpus_per_node, gpus_per_node)
        rows = fallbacks.moe_rows(sources, w.m // g.world, w.k, w.experts // g.world, mine["X"].device)

        def fn():
            return {"Y": fallbacks.fallback_moe(mine["X"], mine["W"], rows)}
    else:
        ref = getattr(fallbacks, f"fallback_{w.kernel}")

        def fn():
            return {"OUT": ref(mine["A"], mine["B"])}
    return fn


def fallback_rank(info: RankInfo, w: Workload, gpus_per_node: int, timed: int = 10, inputs: dict | None = None) -> dict:
    """The op's torch fallback on this rank (the hw backend's baseline) on its ``inputs``."""
    import torch

    dev = torch.device("cuda", torch.cuda.current_device())
    mine = {name: torch.from_numpy(np.ascontiguousarray(a)).to(dev).bfloat16() for name, a in inputs.items()}
    fn = fallback_fn(w, mine, gpus_per_node)
    rank_step("baseline call (torch fallback, gloo collectives)")
    outs = fn()
    rank_step(f"{timed} timed baseline calls")
    times = _timed(fn, timed)
    return {"rank": info.rank, "outputs": {n: t.float().cpu().numpy() for n, t in outs.items()},
            "time_s": float(np.median(times))}
