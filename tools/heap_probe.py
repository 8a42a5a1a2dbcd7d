"""Probe for issue 6's defect (GEMM+AR 32768^2, K = 2048, fails on the emulated 2x2 cluster, where
its symmetric heap is 7 GiB and OUT sits 5 GiB in): run small cases with every heap buffer moved
``pad`` bytes further in, so the kernel and the proxy address the same buffers past 2 or 4 GiB.
A case that passes at pad 0 and fails at a large pad is an offset defect, small enough to debug.

    python tools/heap_probe.py --pads 0,2.5,4.5 --cases gemm_ar,gemm_rs   (GPU machine)
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def padded_rank(info, w, nodes: int, gpn: int, pad: int) -> dict:
    """hw.rank.run_rank with the placement shifted by ``pad`` bytes (in this rank process only)."""
    from mkernel.hw import plan, rank

    place = plan.placement

    def shifted(s):
        p = place(s)
        if not p.heap:
            return p
        return plan.Placement({k: v + pad for k, v in p.heap.items()}, p.heap_bytes + pad, p.bound)

    plan.placement = shifted
    return rank.run_rank(info, w, nodes, gpn, 7, 2, 0, 5.0)


def main() -> None:
    from test_hw_fused import workload

    from mkernel.hw.emulate import launch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pads", default="0,4.5", help="GiB, comma-separated")
    ap.add_argument("--cases", default="gemm_ar", help="tests/test_hw_fused.py CASES names")
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--gpn", type=int, default=2)
    a = ap.parse_args()
    for case in a.cases.split(","):
        for pad in a.pads.split(","):
            t0 = time.time()
            try:
                res = launch(padded_rank, a.nodes * a.gpn,
                             args=(workload(case), a.nodes, a.gpn, int(float(pad) * 2**30) // 4096 * 4096),
                             timeout_s=120)
                verdict = "ok" if all(r["ok"] for r in res) else "WRONG " + str([r["errors"] for r in res])
            except Exception as e:  # noqa: BLE001 - a probe reports every failure and goes on
                verdict = "FAILED " + str(e).strip().splitlines()[-1][:200]
            print(f"{case:20} pad {pad:>5} GiB  {time.time() - t0:5.0f} s  {verdict}", flush=True)


if __name__ == "__main__":
    main()
