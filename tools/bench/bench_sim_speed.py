"""Simulator speed benchmark (issue 3): wall time and events per second of the fused GEMM+AllReduce.

Runs, one after the other on one core:
  1. 2 x 8, M = N = 32768, K = 2048, in full and collapsed to one node;
  2. 64 x 8, same shape, collapsed (the full run is out of reach: 512 ranks x 32768 tiles); collapsed
     runs build only the simulated node's tasks (``first_nodes``);
  3. the default scenario (2 x 8, 8192^2, K = 512) in full, as the events-per-second reference.

Usage: python tools/bench/bench_sim_speed.py [--out docs/results/sim-speed.json] [--skip-full-large]
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import time

from mkernel import Cluster, Workload, load_scenario
from mkernel.builders import gemm_ar
from mkernel.sim import SimBackend


def one(name: str, cluster: Cluster, w: Workload, collapse: bool) -> dict:
    t0 = time.perf_counter()
    span = cluster.fold_nodes  # collapsed: build only the nodes the run simulates, as `mkernel run --collapse`
    schedule = gemm_ar.build(w, cluster, **({"first_nodes": span} if collapse and 0 < span < cluster.nodes else {}))
    build_s = time.perf_counter() - t0
    stats = SimBackend().run(schedule, cluster, collapse=collapse)
    row = {"case": name, "nodes": cluster.nodes, "gpus_per_node": cluster.gpus_per_node, "m": w.m, "n": w.n,
           "k": w.k, "collapsed": stats.metrics["collapsed"], "tasks": len(schedule.tasks),
           "build_s": round(build_s, 3), "sim_wall_s": round(stats.wall_s, 3), "events": stats.events,
           "events_per_s": round(stats.events / stats.wall_s), "simulated_us": round(stats.time_s * 1e6, 2)}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out")
    p.add_argument("--skip-full-large", action="store_true", help="skip the full (uncollapsed) 2x8 32768^2 run")
    args = p.parse_args()
    big = Workload(m=32768, n=32768, k=2048)
    rows = []
    default = load_scenario("default")
    rows.append(one("default 2x8 8192^2 full", default.cluster, default.workload, False))
    rows.append(one("2x8 32768^2 collapsed", Cluster("ib", 2, 8), big, True))
    if not args.skip_full_large:
        rows.append(one("2x8 32768^2 full", Cluster("ib", 2, 8), big, False))
    rows.append(one("64x8 32768^2 collapsed", Cluster("ib", 64, 8), big, True))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    meta = {"date": time.strftime("%Y-%m-%d"), "commit": commit, "python": platform.python_version(),
            "machine": platform.machine(), "cpu": platform.processor() or "unknown"}
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
