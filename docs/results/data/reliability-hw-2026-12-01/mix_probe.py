"""Probe for the open defect of issues 6/10: on the emulated 2x2 cluster, fused launches stop with
'illegal instruction' once executors of several ops live in one process (tests/hw/test_hw_api.py's
2x2 test, tools/studies/long_run.py). Each configuration runs in fresh rank processes: a set of executors is
built, then ``calls`` calls cycle through the ``called`` subset with a synchronize after each, so the
first failure names its op and call. What the H200 runs ruled out, and what they showed, is in
docs/results/2026-12-01-reliability-hw-2.md.

    python docs/results/data/reliability-hw-2026-12-01/mix_probe.py [--calls 36] [--configs all,pair]      (GPU machine)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "tests"))

ALL = ("ag_gemm", "gemm_ar", "gemm_rs", "moe_dispatch_gemm", "ring_attention", "ring_attention_causal")
PAIR = ("ag_gemm", "gemm_ar")
# label -> (executors built, ops called, nodes, gpus per node, variant); variants: "" as the library runs,
# "stagger" each rank first holds rank x 64 MiB + 2 MiB (the ranks' allocations no longer share virtual
# addresses), "idle" four more contexts of the pair's sizes that run nothing
CONFIGS = {
    "pair": (PAIR, PAIR, 2, 2, ""),
    "all": (ALL, ALL, 2, 2, ""),
    "all-called-pair": (ALL, PAIR, 2, 2, ""),
    "all-gemm_ar": (ALL, ("gemm_ar",), 2, 2, ""),
    "pair-idle": (PAIR, PAIR, 2, 2, "idle"),
    "all-stagger": (ALL, ALL, 2, 2, "stagger"),
    "all-1x1": (ALL, ALL, 1, 1, ""),
    "all-1x2": (ALL, ALL, 1, 2, ""),
    "all-2x1": (ALL, ALL, 2, 1, ""),
}


def mix_rank(info, built: tuple, called: tuple, calls: int, nodes: int, gpn: int, variant: str) -> dict:
    import torch
    from harness.cases import workload
    from harness.rank import _case

    from mkernel.hw.rank import cluster_for
    from mkernel.hw.runtime.context import Context
    from mkernel.hw.runtime.executor import Executor

    keep = []
    if variant == "stagger":
        keep.append(torch.empty(info.rank * 64 * 2**20 + 2 * 2**20, dtype=torch.int8, device="cuda"))
    c = cluster_for(info, nodes, gpn)
    ops = {}
    for name in built:
        schedule, inputs, _ = _case(info, workload(name), c, 17)
        sizes = Executor.context_sizes(schedule)
        ctx = Context(None, gpus_per_node=gpn, send_bytes=0, **sizes)
        ops[name] = (ctx, Executor(schedule, ctx), inputs)
        if variant == "idle":
            keep += [Context(None, gpus_per_node=gpn, send_bytes=0, **sizes) for _ in range(2)]
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
    from mkernel.hw.runtime.emulate import launch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=36)
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated, of {', '.join(CONFIGS)}")
    a = ap.parse_args()
    unknown = set(a.configs.split(",")) - set(CONFIGS)
    if unknown:
        ap.error(f"--configs: {', '.join(sorted(unknown))} not among {', '.join(CONFIGS)}")
    for label in a.configs.split(","):
        built, called, nodes, gpn, variant = CONFIGS[label]
        try:
            res = launch(mix_rank, nodes * gpn, args=(built, called, a.calls, nodes, gpn, variant), timeout_s=120)
            bad = [r for r in res if r["failed_at"] is not None]
            verdict = "ok" if not bad else "; ".join(f"rank {r['rank']} call {r['failed_at']} {r['op']}: {r['error']}"
                                                      for r in bad)
        except Exception as e:  # noqa: BLE001 - report and go on to the next configuration
            verdict = "FAILED " + " | ".join(str(e).strip().splitlines()[-2:])[:300]
        print(f"{label:20} {verdict}", flush=True)


if __name__ == "__main__":
    main()
