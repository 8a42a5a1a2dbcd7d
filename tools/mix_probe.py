"""Probe for the known defect of issue 6/10: fused launches stop with 'illegal instruction' on the
emulated cluster once executors of several ops live in one process (tests/test_hw_api.py's strict
xfail, and tools/long_run.py). Each configuration runs in fresh rank processes: a set of executors
is built, then ``calls`` calls cycle through the ``called`` subset with a synchronize after each, so
the first failure names its op and call. On 2026-12-01 (docs/results/2026-12-01-reliability-hw.md)
a seventh configuration held every Triton scratch buffer alive and ran clean; since then each
Executor owns its scratch, so every configuration should pass.

    python tools/mix_probe.py [--calls 36]      (GPU machine; a few seconds per configuration)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

ALL = ("ag_gemm", "gemm_ar", "gemm_rs", "moe_dispatch_gemm", "ring_attention", "ring_attention_causal")
CONFIGS = [  # (executors built, ops called)
    (("gemm_ar",), ("gemm_ar",)),
    (ALL, ALL),
    (ALL, ("gemm_ar",)),
    (("ag_gemm", "gemm_ar"), ("ag_gemm", "gemm_ar")),
    (("gemm_rs", "gemm_ar"), ("gemm_rs", "gemm_ar")),
    (("moe_dispatch_gemm", "gemm_ar"), ("moe_dispatch_gemm", "gemm_ar")),
    (("ring_attention", "gemm_ar"), ("ring_attention", "gemm_ar")),
]


def mix_rank(info, built: tuple, called: tuple, calls: int, nodes: int, gpn: int) -> dict:
    import torch
    from test_hw_fused import workload

    from mkernel.hw.context import Context
    from mkernel.hw.executor import Executor
    from mkernel.hw.rank import _case, cluster_for

    c = cluster_for(info, nodes, gpn)
    ops = {}
    for name in built:
        schedule, inputs, _ = _case(info, workload(name), c, 17)
        ctx = Context(None, gpus_per_node=gpn, send_bytes=0, **Executor.context_sizes(schedule))
        ops[name] = (ctx, Executor(schedule, ctx), inputs)
    for i in range(calls):
        name = called[i % len(called)]
        ctx, op, inputs = ops[name]
        try:
            op(inputs, poison=True)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - the probe reports where the first failure is
            print(f"rank {info.rank}: call {i} {name}: {str(e).splitlines()[0]}", file=sys.stderr, flush=True)
            return {"rank": info.rank, "failed_at": i, "op": name, "error": str(e).splitlines()[0]}
    for ctx, op, _ in ops.values():
        op.check()
        ctx.close()
    return {"rank": info.rank, "failed_at": None}


def main() -> None:
    from mkernel.hw.emulate import launch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=36)
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--gpn", type=int, default=2)
    a = ap.parse_args()
    for built, called in CONFIGS:
        label = f"built {'+'.join(built) if built != ALL else 'all'}; called {'+'.join(called) if called != ALL else 'all'}"
        try:
            res = launch(mix_rank, a.nodes * a.gpn, args=(built, called, a.calls, a.nodes, a.gpn), timeout_s=120)
            bad = [r for r in res if r["failed_at"] is not None]
            verdict = "ok" if not bad else "; ".join(f"rank {r['rank']} call {r['failed_at']} {r['op']}: {r['error']}"
                                                      for r in bad)
        except Exception as e:  # noqa: BLE001 - report and go on to the next configuration
            verdict = "FAILED " + " | ".join(str(e).strip().splitlines()[-2:])[:300]
        print(f"{label:80} {verdict}", flush=True)


if __name__ == "__main__":
    main()
