"""Adaptive SM partition against static splits, in the simulator (issue 7).

For each configuration (op x size from the reference grid, on the paper's 2 x 8 InfiniBand
testbed): the fused op with every static intra-SM budget of ``--comm-sms`` (compute gets the rest),
and with the adaptive controller (:mod:`mkernel.controller`, default policy). Reports per config
the best and worst static split and adaptive / best static; overall the geometric mean and the
maximum (goals: <= 1.05 and <= 1.15). Static runs are collapsed to one node where the schedule is
node-symmetric (exact times), adaptive runs too; MoE is not symmetric and runs in full.

    python tools/bench/bench_controller.py --out docs/results/data/controller.json [--plot traj.png]
    python tools/bench/bench_controller.py --trajectories --out traj.json --plot traj.png   # issue 7's two plots:
        GEMM+AllReduce M = N = 32768, K = 2048 and MoE 131072 tokens, on 2 x 8
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import subprocess
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

CONFIGS = [("gemm_ar", s) for s in (2048, 4096, 8192, 16384)] + [("gemm_rs", s) for s in (2048, 4096, 8192, 16384)] \
    + [("ag_gemm", s) for s in (4096, 8192, 16384, 24576)] + [("ring_attention", s) for s in (768, 1536, 3072, 6144)] \
    + [("moe_dispatch_gemm", s) for s in (8192, 16384, 32768, 65536)]
TRAJECTORIES = [("gemm_ar", 32768), ("moe_dispatch_gemm", 131072)]  # reference sizes: K = 32768 / 16 = 2048


def one(args) -> dict:
    kernel, size, splits = args
    from mkernel import builders
    from mkernel.controller import Balance, Trajectory, sim_controller
    from mkernel.ir import Role
    from mkernel.sim import SimBackend
    from mkernel.studies.sweep import reference_grid, scenario_of

    point = next(p for p in reference_grid(("paper-ib-2x8",)) if p.kernel == kernel and p.size == size)
    sc = scenario_of(point)
    w, c = sc.workload, sc.cluster
    t0 = time.perf_counter()
    fold = {"first_nodes": c.fold_nodes} if builders.node_symmetric(w, c) else {}  # build what collapse simulates
    static = {}
    for n in splits:
        ws = dataclasses.replace(w, sms=((Role.INTRA, n),))
        static[n] = SimBackend().run(builders.get(kernel).build(ws, c, **fold), c, collapse=True).time_s
    traj = Trajectory()
    fused = builders.get(kernel).build(w, c, **fold)
    adaptive = SimBackend().run(fused, c, collapse=True, controller=sim_controller(Balance.for_cluster(c), traj)).time_s
    best = min(static, key=static.get)
    worst = max(static, key=static.get)
    return {"kernel": kernel, "size": size, "static_s": static, "adaptive_s": adaptive, "best_split": best,
            "worst_split": worst, "adaptive_over_best": adaptive / static[best],
            "worst_over_best": static[worst] / static[best],
            "default_split": fused.launches[0].budget(Role.INTRA),
            "trajectory_rank0": traj.points.get(0, []), "wall_s": time.perf_counter() - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--comm-sms", default="2,4,8,16,32,48,64")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--plot", type=Path)
    ap.add_argument("--trajectories", action="store_true", help="only the two trajectory configurations")
    a = ap.parse_args()
    splits = [int(x) for x in a.comm_sms.split(",")]
    configs = TRAJECTORIES if a.trajectories else CONFIGS
    t0 = time.time()
    with ProcessPoolExecutor(a.workers) as pool:
        rows = list(pool.map(one, [(k, s, splits) for k, s in configs]))
    ratios = [r["adaptive_over_best"] for r in rows]
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"{'op':18} {'size':>7} {'best':>5} {'worst/best':>10} {'adaptive/best':>13}")
    for r in rows:
        print(f"{r['kernel']:18} {r['size']:7d} {r['best_split']:5d} {r['worst_over_best']:10.3f} "
              f"{r['adaptive_over_best']:13.3f}")
    print(f"geometric mean adaptive/best {geo:.3f}; max {max(ratios):.3f}; {len(rows)} configs; {time.time() - t0:.0f} s")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    if a.out:
        a.out.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "commit": commit, "splits": splits,
                                     "command": "python tools/bench/bench_controller.py", "geomean": geo,
                                     "max": max(ratios), "rows": rows}, indent=1))
    if a.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        wanted = TRAJECTORIES if a.trajectories else [("gemm_ar", 16384), ("moe_dispatch_gemm", 65536)]
        picks = [r for r in rows if (r["kernel"], r["size"]) in wanted]
        fig, axes = plt.subplots(1, len(picks), figsize=(6 * len(picks), 4))
        for ax, r in zip(axes if len(picks) > 1 else [axes], picks):
            pts = r["trajectory_rank0"] or [(0.0, r["default_split"])]
            ts = [p[0] for p in pts] + [r["adaptive_s"] * 1e6]
            ax.step(ts, [p[1] for p in pts] + [pts[-1][1]], where="post", label="adaptive intra target")
            ax.axhline(r["best_split"], color="k", linestyle="--", label=f"best static ({r['best_split']})")
            ax.set(title=f"{r['kernel']} size {r['size']} (sim, rank 0)", xlabel="time (us)", ylabel="intra SMs")
            ax.legend()
        fig.tight_layout()
        fig.savefig(a.plot, dpi=120)


if __name__ == "__main__":
    main()
