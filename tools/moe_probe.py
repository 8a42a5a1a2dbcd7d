"""Where the fused MoE kernel's time goes at world 1 (issue 6: ~100x slower than a2a + matmul).

For each shape, times on this GPU (CUDA events, median of 5 after 3 warm-up calls):
- ``fused``: the whole fused schedule through the executor;
- ``gather``: the same schedule with its GEMM tiles dropped (the dispatch alone);
- ``gemm``: the same schedule with its gathers dropped and the GEMM tiles' waits removed;
- ``torch``: the fallback (index_select + one matmul per expert), the baseline;
and prints them next to the floors: gathered bytes over HBM bandwidth, FLOPs over the matmul rate.

Usage (on the GPU machine): python tools/moe_probe.py --out $OUT/moe_probe.json
"""
from __future__ import annotations

import argparse
import dataclasses
import json

import numpy as np

from mkernel import builders
from mkernel.ir import BufferKind, Op, Schedule
from mkernel.problems import Workload
from mkernel.scenario import load_scenario

SHAPES = [  # (label, tokens, n, k, topk)
    ("full 8192", 8192, 2048, 7168, 8),
    ("n/8", 8192, 256, 7168, 8),
    ("k/7", 8192, 2048, 1024, 8),
    ("topk 1", 8192, 2048, 7168, 1),
    ("2048 tokens", 2048, 2048, 7168, 8),
]


def keep(s: Schedule, drop: Op) -> Schedule:
    """``s`` without its ``drop`` tasks; waits on signals nothing bumps any more are removed."""
    tasks = [t for t in s.tasks if not (t.op is drop and t.role.value in ("compute", "intra"))]
    bumped = {sig for t in tasks for sig in t.signals}
    out = [dataclasses.replace(t, id=i, waits=tuple(w for w in t.waits if w.signal in bumped))
           for i, t in enumerate(tasks)]
    buffers = tuple(dataclasses.replace(b, kind=BufferKind.SCRATCH) if b.kind is BufferKind.OUTPUT else b
                    for b in s.buffers)  # partly written now: no coverage rule, nothing returned
    return dataclasses.replace(s, tasks=tuple(out), buffers=buffers)


def main() -> None:
    import torch

    from mkernel.hw import api
    from mkernel.hw.context import Context
    from mkernel.hw.executor import Executor
    from mkernel.hw.rank import _timed

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="moe_probe.json")
    args = ap.parse_args()
    import torch.distributed as dist

    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29517", world_size=1, rank=0)  # the fallback's group
    torch.cuda.set_device(0)
    cluster = load_scenario("h200-1x1").cluster
    rows = []
    for label, tokens, n, k, topk in SHAPES:
        w = Workload(kernel="moe_dispatch_gemm", m=tokens, n=n, k=k, topk=topk, experts=256)
        module = builders.get(w.kernel)
        full = module.build(w, cluster)
        inputs = module.make_inputs(w, cluster, np.random.default_rng(0))
        mine = {name: torch.from_numpy(a[0]).cuda().bfloat16() for name, a in inputs.items()}
        row = {"label": label, "tokens": tokens, "n": n, "k": k, "topk": topk,
               "gathers": sum(t.op is Op.GATHER for t in full.tasks), "gemms": sum(t.op is Op.GEMM for t in full.tasks)}
        for name, sched in (("fused", full), ("gather", keep(full, Op.GEMM)), ("gemm", keep(full, Op.GATHER))):
            with Context(None, gpus_per_node=1, send_bytes=0, **Executor.context_sizes(sched)) as ctx:
                op = Executor(sched, ctx)
                for _ in range(3):
                    outs = op(mine, poison=True) or {}
                op.check()
                row[name + "_us"] = float(np.median(_timed(lambda: op(mine, outs), 5))) * 1e6
                if name == "fused":
                    ref = api.fallback_moe(mine["X"], mine["W"], w, 1)
                    y = outs["Y"].float()
                    row["rel_err"] = float((y - ref.float()).norm() / ref.float().norm())
        row["torch_us"] = float(np.median(_timed(lambda: api.fallback_moe(mine["X"], mine["W"], w, 1), 5))) * 1e6
        pairs = tokens * topk
        gpu = cluster.gpu  # the calibrated H200 profile
        row["floor_gather_us"] = pairs * k * 2 * 2 / (gpu.hbm_gb_per_s * 1e3)  # read + write at the HBM rate
        row["floor_gemm_us"] = 2.0 * pairs * k * n / (gpu.matmul_tflops * 1e6)  # at the matmul rate
        rows.append(row)
        print(json.dumps(row), flush=True)
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)
    print(f"{'shape':<12} {'gathers':>7} {'gemms':>6} {'fused us':>10} {'gather us':>10} {'gemm us':>10} "
          f"{'torch us':>9} {'floor g/m':>12} {'rel err':>8}")
    for r in rows:
        print(f"{r['label']:<12} {r['gathers']:>7} {r['gemms']:>6} {r['fused_us']:>10.0f} {r['gather_us']:>10.0f} "
              f"{r['gemm_us']:>10.0f} {r['torch_us']:>9.0f} {r['floor_gather_us']:>5.0f}/{r['floor_gemm_us']:<6.0f} "
              f"{r['rel_err']:>8.1e}")


if __name__ == "__main__":
    main()
