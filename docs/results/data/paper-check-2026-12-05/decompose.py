"""Where MoE's and ring attention's paper-check misses sit: per grid point, the paper's baseline
split into its collective and its compute, the fused time, and two bounds on the speedup.

    python docs/results/data/paper-check-2026-12-05/decompose.py GRID/results.jsonl

GRID: a reference-profile grid of the paper check (results.jsonl with the five ops). Per point:
- baseline = the paper's baseline's library calls, each timed as the simulator times it
  (sim/library.py: NCCL's model for the collective, the cuBLAS wave model for a dense GEMM) and,
  for attention, the baseline's attention launch (baseline time - all-gather);
- ideal overlap of the baseline = baseline / max(collective, compute): the speedup a perfect overlap
  of the baseline's own two parts would give;
- fused floor = baseline / max(the fused op's compute at library speed on every SM, its network
  bytes over the NICs, its NVLink bytes over the port): the most any fused kernel moving our
  fused schedule's bytes could give (no per-task costs, no waits).
Reads the scenario files and the NCCL model; runs no simulation.
"""
from __future__ import annotations

import json
import sys

from mkernel import nccl
from mkernel.builders import _collectives as coll
from mkernel.routing import routing_for
from mkernel.studies import sweep
from mkernel.sim.library import gemm_call_us

ATTN_FLOPS = 4.0  # per (query, key) pair and head dimension: QK^T and PV


def _cluster(row: dict):
    point = sweep.Point(row["testbed"], row["kernel"], row["size"],
                        tuple((k, row[k]) for k in ("m", "n", "k") if k in row)
                        + ((("routing", "shifted"),) if row["kernel"] == "moe_dispatch_gemm" else ()),
                        (("kernels", row["kernels"]),))
    return sweep.scenario_of(point)


def moe(row: dict) -> dict:
    sc = _cluster(row)
    w, c = sc.workload, sc.cluster
    base = c.for_variant("nccl_even_a2a+dense_gemm")
    routing = routing_for(w, c.nodes, c.gpus_per_node)
    pad = max(int(routing.pairs_to(r).max()) for r in range(c.gpus_per_node))
    a2a = nccl.estimate("alltoall", c.world * pad * w.k * 2, nccl.fabric_of(base)).time_us
    gemm = gemm_call_us(c.world * pad, w.n, w.k, base)
    rows = w.m * w.topk // c.world  # (token, expert) rows each GPU computes, uniform routing
    fused = c.for_variant("fused")
    return {"collective_us": a2a, "compute_us": gemm, "pad_rows": pad, "fused_compute_floor_us":
            2.0 * rows * w.n * w.k / (fused.gpu.matmul_tflops * 1e6)}


def attention(row: dict) -> dict:
    sc = _cluster(row)
    w, c = sc.workload, sc.cluster
    base = c.for_variant("nccl_hier_ag_kv+attn")
    kv = 2 * c.world * w.m * w.n * w.k * 2  # K and V of every GPU's sequence, bf16 (the builder's call)
    ag = nccl.estimate("all_gather", kv, nccl.fabric_of(base)).time_us
    flops = ATTN_FLOPS * w.m * (w.m * c.world) * w.n * w.k  # this GPU's queries against every key
    fused = c.for_variant("fused")
    return {"collective_us": ag, "compute_us": row["paper_baseline_us"] - ag,
            "fused_compute_floor_us": flops / (fused.gpu.matmul_tflops * fused.gpu.attention_efficiency * 1e6)}


def main(path: str) -> None:
    rows = [json.loads(line) for line in open(path)]
    print("| testbed | op | size | baseline us (collective + compute) | ideal overlap of the baseline | "
          "fused us | predicted | fused floor us (compute / network / NVLink) | fused floor speedup |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: (r["testbed"], r["kernel"], r["size"])):
        if r["kernel"] not in ("moe_dispatch_gemm", "ring_attention") or "error" in r:
            continue
        d = moe(r) if r["kernel"] == "moe_dispatch_gemm" else attention(r)
        sc = _cluster(r)
        c = sc.cluster
        net = r["network_bytes_per_gpu"] / (c.nic.gb_per_s * 1e3)  # gb_per_s: all of the GPU's NICs
        nvl = r["nvlink_bytes_per_gpu"] / (c.nvlink.bw_gb_per_s * 1e3)
        floor = max(d["fused_compute_floor_us"], net, nvl)
        b = r["paper_baseline_us"]
        print(f"| {r['testbed']} | {r['kernel']} | {r['size']} | {b:.0f} ({d['collective_us']:.0f} + "
              f"{d['compute_us']:.0f}) | {b / max(d['collective_us'], d['compute_us']):.2f}x | {r['fused_us']:.0f} | "
              f"{r['paper_speedup']:.2f}x | {floor:.0f} ({d['fused_compute_floor_us']:.0f} / {net:.0f} / {nvl:.0f}) | "
              f"{b / floor:.2f}x |")


if __name__ == "__main__":
    main(sys.argv[1])
