"""Narrow down the open defect of tests/test_hw_api.py on the emulated cluster (the torch ops and
their fallbacks looped on 2x2 stop: an illegal instruction, later a hang in a fallback;
docs/results/2026-12-01-reliability-hw-2.md): run the same rank function on op subsets, each in its
own launch, and print which subsets fail.

    python tools/api_bisect.py [--nodes 2 --gpn 2]      (GPU machine; about a minute per subset)
"""
from __future__ import annotations

import argparse

SUBSETS = [("gemm_ar",), ("gemm_rs",), ("ag_gemm",), ("ring_attention",), ("gemm_ar", "gemm_rs"),
           ("gemm_ar", "ag_gemm"), ("gemm_ar", "ring_attention"), ("gemm_ar", "gemm_rs", "ag_gemm", "ring_attention")]


def main() -> None:
    from mkernel.hw import rank
    from mkernel.hw.emulate import launch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--gpn", type=int, default=2)
    ap.add_argument("--calls", type=int, default=3)
    a = ap.parse_args()
    for ops in SUBSETS:
        try:
            res = launch(rank.api_rank, a.nodes * a.gpn, args=(a.gpn, 5, a.calls, ops), timeout_s=240)
            print(f"{'+'.join(ops):45} {'ok' if all(r['ok'] for r in res) else 'WRONG'}  "
                  f"{max(max(r['errors'].values()) for r in res):.2e}", flush=True)
        except Exception as e:  # noqa: BLE001 - the point is to see which subsets fail
            print(f"{'+'.join(ops):45} FAILED  {str(e).splitlines()[-1][:150]}", flush=True)


if __name__ == "__main__":
    main()
