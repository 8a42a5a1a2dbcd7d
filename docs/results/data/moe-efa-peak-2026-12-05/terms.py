"""The paper's MoE baseline on paper-efa-2x8, term by term, per grid size (docs/results/2026-12-05-moe-efa-peak.md).

    python docs/results/data/moe-efa-peak-2026-12-05/terms.py

Per size, the check's point (paper_check.points: multinomial routing, seed T, reference kernels):
the routing's pair counts (mean, the largest = the even all-to-all's pad), the all-to-all's bytes per rank
and its modelled time (mkernel.nccl, as the baseline's library call takes it) with its busbw beside p5's
published 2-node alltoall busbw (p5-a2a-scale, interpolated in log size), the dense GEMM of world x pad
rows (sim.library.gemm_call_us) and the GEMM of the mean rows (no pad), and the sum. No simulation is run.

    python docs/results/data/moe-efa-peak-2026-12-05/terms.py readings FUSED_JSONL

The other readings of "an even all-to-all, then one dense, ungrouped GEMM" (same routing, same call models), and
what 4.5x would need of each term of ours, against the fused times of FUSED_JSONL (the paper check's results.jsonl).
"""
from __future__ import annotations

import json
import math
import sys
import tomllib
from pathlib import Path

import numpy as np

from mkernel import nccl
from mkernel.ir import DTYPE_BYTES
from mkernel.routing import routing_for
from mkernel.sim.library import gemm_call_us
from mkernel.studies import paper_check, sweep

SIZES = (8192, 16384, 32768, 65536, 131072)


def published_busbw(nbytes: float) -> tuple[float, str]:
    """p5's 2-node alltoall busbw at nbytes (log interpolation; flat beyond the curve's ends, flagged)."""
    curves = tomllib.loads(Path("scenarios/nccl/published.toml").read_text())["curve"]
    pts = sorted((s, b) for n, s, b in next(c for c in curves if c["id"] == "p5-a2a-scale")["points"] if n == 2)
    xs, ys = [math.log(s) for s, _ in pts], [b for _, b in pts]
    tag = "" if pts[0][0] <= nbytes <= pts[-1][0] else " (beyond the curve)"
    return float(np.interp(math.log(nbytes), xs, ys)), tag


def _points() -> dict:
    figs, _ = paper_check.load()
    return {p.size: p for p in paper_check.points(figs, pairs={("moe_dispatch_gemm", "paper-efa-2x8")})}


def main() -> None:
    pts = _points()
    print("| T | mean pair rows | pad (largest pair) | pad / mean | busiest rank rows / mean | a2a MiB/rank | "
          "a2a us (model) | busbw model / p5 published GB/s | dense GEMM us (16 x pad rows) | GEMM of mean rows us | "
          "paper baseline us |")
    print("|" + "---|" * 11)
    for size in SIZES:
        sc = sweep.scenario_of(pts[size])
        w, c = sc.workload, sc.cluster.for_variant("nccl_even_a2a+dense_gemm")
        r = routing_for(w, c.nodes, c.gpus_per_node)
        pairs = np.stack([r.pairs_to(s) for s in range(c.world)])
        mean = pairs.mean()
        pad = int(pairs.max())
        rows = np.array([r.rows(d) for d in range(c.world)])
        nbytes = c.world * pad * w.k * DTYPE_BYTES[w.dtype]
        est = nccl.estimate("alltoall", nbytes, nccl.fabric_of(c))
        pub, tag = published_busbw(nbytes)
        gemm = gemm_call_us(c.world * pad, w.n, w.k, c)
        gemm_mean = gemm_call_us(int(round(rows.mean())), w.n, w.k, c)
        print(f"| {size} | {mean:.0f} | {pad} | {pad / mean:.2f} | {rows.max() / rows.mean():.2f} | "
              f"{nbytes / 2**20:.0f} | "
              f"{est.time_us:.0f} | {est.busbw_gb_per_s:.1f} / {pub:.1f}{tag} | {gemm:.0f} | {gemm_mean:.0f} | "
              f"{est.time_us + gemm:.0f} |")


def _a2a(rows_per_pair: float, w, c) -> float:
    return nccl.estimate("alltoall", c.world * rows_per_pair * w.k * DTYPE_BYTES[w.dtype], nccl.fabric_of(c)).time_us


def readings(fused_jsonl: str) -> None:
    """Per size: the baseline under each reading (us, and the speedup over the check's fused time), then what a
    4.5x speedup needs of the fused time, of our a2a and of our GEMM, each alone."""
    fused = {r["size"]: r["fused_us"] for r in map(json.loads, Path(fused_jsonl).read_text().splitlines())
             if r["kernel"] == "moe_dispatch_gemm" and r["testbed"] == "paper-efa-2x8"}
    pts = _points()
    print("| T | fused us | A: ours (pair pad) | B: per-(source, expert) capacity, bmm | "
          "C: ours + GEMM per expert padded "
          "to the largest expert | D: no pad (mean pairs) | E: ours + the send-buffer pack | F: every token to every "
          "rank, GEMM of all T |")
    print("|" + "---|" * 8)
    need = []
    for size in SIZES:
        sc = sweep.scenario_of(pts[size])
        w, c = sc.workload, sc.cluster.for_variant("nccl_even_a2a+dense_gemm")
        r = routing_for(w, c.nodes, c.gpus_per_node)
        per_gpu = w.experts // c.world
        pairs = np.stack([r.pairs_to(s) for s in range(c.world)])
        # rows per (source, expert)
        se = np.stack([np.bincount(r.routes[s].ravel(), minlength=w.experts) for s in range(c.world)])
        pad, cap, big = int(pairs.max()), int(se.max()), int(se.sum(axis=0).max())
        a2a, gemm = _a2a(pad, w, c), gemm_call_us(c.world * pad, w.n, w.k, c)
        row_bytes = w.k * DTYPE_BYTES[w.dtype]
        # the pack: read the routed rows of X, write the padded send buffer
        pack = (pairs.sum(axis=1).max() + c.world * pad) * row_bytes / (c.gpu.hbm_gb_per_s * 1e3)
        alts = {"A": a2a + gemm,
                "B": _a2a(per_gpu * cap, w, c) + gemm_call_us(c.world * per_gpu * cap, w.n, w.k, c),
                "C": a2a + gemm_call_us(per_gpu * big, w.n, w.k, c),
                "D": _a2a(pairs.mean(), w, c) + gemm_call_us(int(round(pairs.mean() * c.world)), w.n, w.k, c),
                "E": a2a + gemm + pack,
                "F": _a2a(w.m // c.world, w, c) + gemm_call_us(w.m, w.n, w.k, c)}
        f = fused[size]
        print(f"| {size} | {f:.0f} | " + " | ".join(f"{v:.0f} ({v / f:.2f}x)" for v in alts.values()) + " |")
        need.append((size, f, a2a, gemm, pad / pairs.mean()))
    print()
    print("| T | 4.5x needs fused us (x ours) | or a2a us (x ours; pad / mean pair it implies) | or GEMM us (x ours) |")
    print("|---|---|---|---|")
    for size, f, a2a, gemm, padf in need:
        b = a2a + gemm
        na, ng = 4.5 * f - gemm, 4.5 * f - a2a
        print(f"| {size} | {b / 4.5:.0f} ({b / 4.5 / f:.2f}) | {na:.0f} ({na / a2a:.2f}; {padf * na / a2a:.2f}) | "
              f"{ng:.0f} ({ng / gemm:.2f}) |")


if __name__ == "__main__":
    if sys.argv[1:2] == ["readings"]:
        readings(sys.argv[2])
    else:
        main()
