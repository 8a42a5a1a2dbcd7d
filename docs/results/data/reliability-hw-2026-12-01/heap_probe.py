"""Probe for issue 6's defect (GEMM+AR 32768^2, K = 2048, fails on the emulated 2x2 cluster, where
its symmetric heap is 7 GiB and OUT sits 5 GiB in): run small cases with every heap buffer moved
``pad`` bytes further in, so the kernel and the proxy address the same buffers past 2 or 4 GiB.
A case that passes at pad 0 and fails at a large pad is an offset defect, small enough to debug.
``--sizes`` runs GEMM+AR itself at M = N = S (K given) instead, inputs drawn on the GPU and rows
checked against an fp32 torch reference there (a numpy oracle of 32768^2 per rank takes minutes).

    python docs/results/data/reliability-hw-2026-12-01/heap_probe.py --pads 0,2.5,4.5 --cases gemm_ar,gemm_rs   (GPU machine)
    python docs/results/data/reliability-hw-2026-12-01/heap_probe.py --sizes 24576,32768 --k 2048
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "tests"))


def padded_rank(info, w, nodes: int, gpn: int, pad: int) -> dict:
    """harness.rank.run_rank with the placement shifted by ``pad`` bytes (in this rank process only)."""
    from harness import rank

    from mkernel.hw.lowering import plan

    place = plan.placement

    def shifted(s):
        p = place(s)
        if not p.heap:
            return p
        return plan.Placement({k: v + pad for k, v in p.heap.items()}, p.heap_bytes + pad, p.bound)

    plan.placement = shifted
    return rank.run_rank(info, w, nodes, gpn, 7, 2, 0, 5.0)


def size_rank(info, size: int, k: int, nodes: int, gpn: int, wait_s: float, calls: int) -> dict:
    """GEMM+AR at M = N = ``size``: two poisoned calls, then ``calls`` - 2 into the same output (as
    a benchmark's timing loop), the device errors checked, and rows 0:128 and the last 128 against
    sum over ranks of A_r @ B_r in fp32 (every rank redraws all inputs)."""
    import torch

    from mkernel import builders
    from mkernel.hw.rank import cluster_for
    from mkernel.hw.runtime.context import Context
    from mkernel.hw.runtime.executor import Executor
    from mkernel.problems import Workload

    c = cluster_for(info, nodes, gpn)
    schedule = builders.get("gemm_ar").build(Workload(kernel="gemm_ar", m=size, n=size, k=k), c)

    def draw(r: int) -> dict:
        g = torch.Generator(device="cuda").manual_seed(r)
        return {n: (torch.randn(*shape, generator=g, device="cuda") / k ** 0.5).bfloat16()
                for n, shape in (("A", (size, k)), ("B", (k, size)))}
    t0 = time.time()
    with Context(None, gpus_per_node=gpn, send_bytes=0, timeout_s=wait_s, **Executor.context_sizes(schedule)) as ctx:
        op = Executor(schedule, ctx, timeout_s=wait_s)
        mine = draw(info.rank)
        outs = {}
        print(f"rank {info.rank}: set up in {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
        for i in range(calls):
            outs = op(mine, outs if i >= 2 else None, poison=i < 2)
            torch.cuda.synchronize()
            print(f"rank {info.rank}: call {i} done at {time.time() - t0:.1f} s", file=sys.stderr, flush=True)
        op.check()
        out = outs["OUT"]
        rows = torch.cat([torch.arange(128), torch.arange(size - 128, size)]).cuda()
        ref = sum(d["A"][rows].float() @ d["B"].float() for d in map(draw, range(info.world)))
        err = ((out[rows].float() - ref).norm() / ref.norm()).item()
        return {"rank": info.rank, "ok": err <= 1e-2 and not out.isnan().any().item(), "errors": err,
                "tasks": int(op.plan.tasks.shape[0]), "flags": op.plan.n_flags, "wall_s": time.time() - t0}


def main() -> None:
    from harness.cases import workload
    from harness.rank import TOLERANCE

    from mkernel.hw.runtime.emulate import launch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pads", default="0,4.5", help="GiB, comma-separated")
    ap.add_argument("--cases", default="gemm_ar", help="tests/harness/cases.py CASES names")
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--gpn", type=int, default=2)
    ap.add_argument("--sizes", default="", help="GEMM+AR sizes instead of the padded cases")
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--wait-s", type=float, default=10.0)
    ap.add_argument("--calls", type=int, default=2)
    a = ap.parse_args()
    for size in filter(None, a.sizes.split(",")):
        t0 = time.time()
        try:
            res = launch(size_rank, a.nodes * a.gpn, args=(int(size), a.k, a.nodes, a.gpn, a.wait_s, a.calls), timeout_s=400)
            verdict = ("ok " if all(r["ok"] for r in res) else "WRONG ") + str(res[0])
        except Exception as e:  # noqa: BLE001 - a probe reports every failure and goes on
            verdict = "FAILED " + " | ".join(str(e).strip().splitlines()[-3:])[:600]
        print(f"gemm_ar {size}^2 K={a.k} {a.nodes}x{a.gpn}  {time.time() - t0:5.0f} s  {verdict}", flush=True)
    if a.sizes:
        return
    for case in a.cases.split(","):
        for pad in a.pads.split(","):
            t0 = time.time()
            try:
                res = launch(padded_rank, a.nodes * a.gpn,
                             args=(workload(case), a.nodes, a.gpn, int(float(pad) * 2**30) // 4096 * 4096),
                             timeout_s=120)
                exact = all(e <= TOLERANCE for r in res for e in r["errors"].values())
                verdict = "ok" if exact and not any(any(r["unwritten"].values()) for r in res) else \
                    "WRONG " + str([r["errors"] for r in res])
            except Exception as e:  # noqa: BLE001 - a probe reports every failure and goes on
                verdict = "FAILED " + str(e).strip().splitlines()[-1][:200]
            print(f"{case:20} pad {pad:>5} GiB  {time.time() - t0:5.0f} s  {verdict}", flush=True)


if __name__ == "__main__":
    main()
