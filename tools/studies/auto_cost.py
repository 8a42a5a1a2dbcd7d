"""What auto's choice costs (docs/results/2026-12-04-auto.md): per point, building and checking both
schedules, both estimates (mkernel/builders/_auto.py estimate_us) and both simulations, in seconds, at
the study's 64-node points (the grouped, folded timing builds a sim run makes) and at 2 x 8 for the
flat, whole builds a hw run makes. Prints a markdown table; CPU only.

Usage (from the repository root): python tools/studies/auto_cost.py
"""
from __future__ import annotations

import time

from mkernel import runner
from mkernel.backend import get_backend
from mkernel.builders._auto import estimate_us
from mkernel.studies import study, sweep

LARGEST = (("ag_gemm", 16384, ""), ("gemm_ar", 8192, ""), ("gemm_rs", 8192, ""), ("ring_attention", 2048, ""),
           ("ring_attention", 2048, "causal=1,"), ("moe_dispatch_gemm", 1024, ""),
           ("moe_dispatch_gemm", 1024, "routing=zipf_shifted,"))
FLAT = (("gemm_ar", 8192), ("ring_attention", 512), ("moe_dispatch_gemm", 128))


def measure(point, flat: bool) -> str:
    sc = sweep.scenario_of(point)
    engine = get_backend("sim")
    t0 = time.perf_counter()
    fused, baseline = runner.build(sc) if flat else runner.build(sc, folded=True, grouped=True, timing=True)
    t1 = time.perf_counter()
    estimate_us(fused, sc.cluster), estimate_us(baseline, sc.cluster)
    t2 = time.perf_counter()
    engine.run(fused, sc.cluster, collapse=True), engine.run(baseline, sc.cluster, collapse=True)
    t3 = time.perf_counter()
    kind = "flat, whole (hw)" if flat else "grouped, folded (sim)"
    return f"| {point.key.replace('/schedule=fused', '')} | {kind} | {t1 - t0:.2f} | {t2 - t1:.2f} | {t3 - t2:.2f} |"


def main() -> None:
    points = {p.key: p for p in study.auto_points()}
    print("| point | build | build + validate, s | both estimates, s | both simulations, s |\n|---|---|---|---|---|")
    for cluster in ("ib-400g-rail", "efa-400g-rail"):
        for kernel, size, option in LARGEST:
            print(measure(points[f"scaleout/{cluster}-64x8/{kernel}/{size}/{option}schedule=fused"], False), flush=True)
    for kernel, size in FLAT:
        print(measure(points[f"scaleout/ib-400g-rail-2x8/{kernel}/{size}/schedule=fused"], True), flush=True)


if __name__ == "__main__":
    main()
