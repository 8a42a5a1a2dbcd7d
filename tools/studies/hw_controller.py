"""The adaptive SM partition on the GPU against static splits and against the simulator (issue 7,
items 3-5), on the emulated cluster of the GPUs at hand.

Device part (``--out DIR``): every rank of an emulated ``--nodes`` x ``--gpus-per-node`` cluster
(MPS, an SM budget per rank) runs each config's fused schedule with its default static split, with
every intra budget of ``--comm-sms``, and under the adaptive controller (``Balance.for_cluster``,
the simulator's policy). Inputs are seeded random bf16 on the GPU; outputs are poisoned before the
first call of each variant, and every variant's output must equal the default split's (same tiles,
same sums: a role change moves work between SMs, not between formulas). Times: median of
``--iters`` calls between CUDA events after 3 warm-up calls, the slowest rank. The adaptive kernel's
target trajectory of its last call is read back from the GPU. Writes ``DIR/hw.json``.

Simulator part (``--sim DIR``, no GPU): the same schedules (same commit, same cluster: the SM
budget each rank had) in the simulator, static and adaptive, and the comparison: the settled split
and the convergence time of the two trajectories, adaptive / best static on both backends. Writes
``DIR/compare.json`` and ``DIR/trajectories.png``.

    python tools/studies/hw_controller.py --out DIR            # on the GPU machine
    python tools/studies/hw_controller.py --sim DIR            # anywhere, after
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

# (op, size) of the reference grid: the two trajectory cases of the issue, then one size of every op
CONFIGS = (("gemm_ar", 32768), ("moe_dispatch_gemm", 131072), ("gemm_ar", 8192), ("gemm_rs", 8192),
           ("ag_gemm", 8192), ("ring_attention", 3072), ("moe_dispatch_gemm", 16384))


def workload(kernel: str, size: int):
    from mkernel.problems import Workload
    from mkernel.studies.sweep import reference_grid

    point = next(p for p in reference_grid(testbeds=("paper-ib-2x8",), kernels=(kernel,)) if p.size == size)
    return Workload(kernel=kernel, **dict(point.shape))


def schedule_of(kernel: str, size: int, cluster, intra: int | None = None):
    from mkernel import builders
    from mkernel.ir import Role

    w = workload(kernel, size)
    if intra is not None:
        w = dataclasses.replace(w, sms=((Role.INTRA, intra),))
    return builders.get(kernel).build(w, cluster)


def rank_main(info, configs, nodes: int, gpn: int, splits: list[int], iters: int) -> list[dict]:
    """One rank: every config's static splits and the adaptive run (module level: ranks are spawned)."""
    import torch

    from mkernel.controller import Balance
    from mkernel.hw.runtime.context import Context
    from mkernel.hw.runtime.executor import Executor
    from mkernel.hw.rank import cluster_for, median_s
    from mkernel.ir import BufferKind, Role

    c = cluster_for(info, nodes, gpn)
    policy = Balance.for_cluster(c)
    rows = []
    for ci, (kernel, size) in enumerate(configs):
        default = schedule_of(kernel, size, c)
        g = torch.Generator(device="cuda").manual_seed(1000 * ci + info.rank)
        inputs = {b.name: (torch.randn(b.rows, b.cols, generator=g, device="cuda") / b.cols ** 0.5).bfloat16()
                  for b in default.buffers if b.kind is BufferKind.INPUT}
        variants = [("static", default.launches[0].budget(Role.INTRA), default, None)]
        variants += [("static", n, schedule_of(kernel, size, c, n), None) for n in splits
                     if n != variants[0][1] and n < c.gpu.sms]
        variants.append(("adaptive", variants[0][1], default, policy))
        row = {"kernel": kernel, "size": size, "sm_budget": info.sm_budget, "static": {}, "default_split": variants[0][1]}
        reference = None
        for kind, intra, schedule, controller in variants:
            print(f"rank {info.rank}: {kernel} {size} {kind} intra {intra} ...", file=sys.stderr, flush=True)
            with Context(None, gpus_per_node=gpn, send_bytes=0, **Executor.context_sizes(schedule)) as ctx:
                op = Executor(schedule, ctx, controller=controller, cluster=c)
                outs = op(inputs, poison=True)
                op.check()
                if reference is None:
                    reference = {n: t.float() for n, t in outs.items()}
                diff = max(((outs[n].float() - r).norm() / r.norm()).item() for n, r in reference.items())
                nan = int(sum(torch.isnan(outs[n].float()).sum().item() for n in reference))
                t = median_s(lambda: op(inputs, outs), iters)
                op.check()
                print(f"rank {info.rank}: {kernel} {size} {kind} intra {intra}: {t * 1e6:.1f} us, diff {diff:.1e}",
                      file=sys.stderr, flush=True)
                entry = {"s": t, "diff_vs_default": diff, "unwritten": nan,
                         "compute_sms": op.blocks[0], "intra_sms": op.blocks[1]}
                if controller is not None:
                    entry["trajectory"] = op.trajectory()
                    row["adaptive"] = entry
                else:
                    row["static"][intra] = entry
            torch.cuda.empty_cache()
        rows.append(row)
    return rows


def run_device(out: Path, configs, nodes: int, gpn: int, splits: list[int], iters: int) -> None:
    import torch

    from mkernel.hw.runtime.emulate import launch

    t0 = time.perf_counter()
    per_rank = launch(rank_main, nodes * gpn, args=(configs, nodes, gpn, splits, iters), timeout_s=540)
    rows = []
    for ci, (kernel, size) in enumerate(configs):
        every = [r[ci] for r in per_rank]
        row = {k: every[0][k] for k in ("kernel", "size", "sm_budget", "default_split")}
        row["static"] = {n: {"s": max(r["static"][n]["s"] for r in every),
                             "ok": all(r["static"][n]["unwritten"] == 0 and r["static"][n]["diff_vs_default"] <= 1e-3
                                       for r in every)} for n in every[0]["static"]}
        row["adaptive"] = {"s": max(r["adaptive"]["s"] for r in every),
                           "ok": all(r["adaptive"]["unwritten"] == 0 and r["adaptive"]["diff_vs_default"] <= 1e-3
                                     for r in every),
                           "diff_vs_default": max(r["adaptive"]["diff_vs_default"] for r in every),
                           "initial_intra": every[0]["adaptive"]["intra_sms"],
                           "trajectory": {r_i: r["adaptive"]["trajectory"] for r_i, r in enumerate(every)}}
        rows.append(row)
        best = min(row["static"], key=lambda n: row["static"][n]["s"])
        print(f"{kernel:<18} {size:>6}  default {row['default_split']:>3}: {row['static'][row['default_split']]['s'] * 1e6:9.1f} us"
              f"  best {best:>3}: {row['static'][best]['s'] * 1e6:9.1f} us  adaptive {row['adaptive']['s'] * 1e6:9.1f} us"
              f" ({row['adaptive']['s'] / row['static'][best]['s']:.3f}x best)"
              f"  ok {all(v['ok'] for v in row['static'].values()) and row['adaptive']['ok']}", flush=True)
    commit = Path(".commit").read_text().strip() if Path(".commit").exists() else None
    out.mkdir(parents=True, exist_ok=True)
    (out / "hw.json").write_text(json.dumps({
        "date": time.strftime("%Y-%m-%d"), "commit": commit, "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__, "nodes": nodes, "gpus_per_node": gpn, "iters": iters, "splits": splits,
        "wall_s": time.perf_counter() - t0, "rows": rows}, indent=1) + "\n")


def settled(points: list, movable: int, tolerance: int) -> dict:
    """The split a trajectory settles on and when: ``end`` is the first change to 0 or ``movable``
    (a role's queue ran out; before it, the policy keeps both roles in [1, movable - 1]), the
    settled split is the target in effect just before it, and convergence is the earliest time
    from which every target until the end stays within ``tolerance`` SMs of the settled split."""
    end = next((t for t, n in points[1:] if n in (0, movable)), None)
    body = [(t, n) for t, n in points if end is None or t < end]
    final = body[-1][1]
    converged = body[0][0]
    for t, n in body:
        if abs(n - final) > tolerance:
            converged = None
        elif converged is None:
            converged = t
    return {"settled": final, "converged_us": converged, "end_us": end, "changes": len(points) - 1}


def run_sim(folder: Path) -> None:
    from mkernel import builders
    from mkernel.cluster import Cluster
    from mkernel.controller import Balance, Trajectory, sim_controller
    from mkernel.ir import Role
    from mkernel.sim import SimBackend

    hw = json.loads((folder / "hw.json").read_text())
    nodes, gpn = hw["nodes"], hw["gpus_per_node"]
    out = []
    for row in hw["rows"]:
        kernel, size = row["kernel"], row["size"]
        c = Cluster("hw", nodes, gpn).with_sms(row["sm_budget"])
        policy = Balance.for_cluster(c)
        collapse = builders.node_symmetric(workload(kernel, size), c)
        sim = SimBackend()
        static = {int(n): sim.run(schedule_of(kernel, size, c, int(n)), c, collapse=collapse).time_s
                  for n in row["static"]}
        traj = Trajectory()
        default = schedule_of(kernel, size, c)
        adaptive = sim.run(default, c, collapse=collapse, controller=sim_controller(policy, traj)).time_s
        movable = default.launches[0].budget(Role.COMPUTE) + default.launches[0].budget(Role.INTRA)
        tol = max(policy.hysteresis, round(0.1 * movable))
        initial = row["adaptive"]["initial_intra"]
        sim_points = [(0.0, initial)] + [(t, n) for t, n in traj.points.get(0, [])]
        hw_static = {int(n): v["s"] for n, v in row["static"].items()}
        entry = {"kernel": kernel, "size": size, "movable": movable, "initial_intra": initial,
                 "hw": {"static_s": hw_static, "adaptive_s": row["adaptive"]["s"],
                        "adaptive_over_best": row["adaptive"]["s"] / min(hw_static.values()),
                        "adaptive_over_default": row["adaptive"]["s"] / hw_static[row["default_split"]],
                        "best_split": min(hw_static, key=hw_static.get), "ok": row["adaptive"]["ok"]
                        and all(v["ok"] for v in row["static"].values()),
                        "ranks": {r: settled([tuple(p) for p in pts], movable, tol)
                                  for r, pts in row["adaptive"]["trajectory"].items()}},
                 "sim": {"static_s": static, "adaptive_s": adaptive,
                         "adaptive_over_best": adaptive / min(static.values()),
                         "adaptive_over_default": adaptive / static[row["default_split"]],
                         "best_split": min(static, key=static.get), "rank0": settled(sim_points, movable, tol),
                         "trajectory": sim_points},
                 "hw_trajectory": row["adaptive"]["trajectory"], "tolerance": tol}
        out.append(entry)
        h0, s0 = entry["hw"]["ranks"]["0"], entry["sim"]["rank0"]
        print(f"{kernel:<18} {size:>6}  settled hw {h0['settled']:>3} sim {s0['settled']:>3}  "
              f"converged hw {_us(h0['converged_us'])} sim {_us(s0['converged_us'])}  adaptive/best hw "
              f"{entry['hw']['adaptive_over_best']:.3f} sim {entry['sim']['adaptive_over_best']:.3f}", flush=True)
    (folder / "compare.json").write_text(json.dumps({"hw": {k: hw[k] for k in hw if k != "rows"}, "rows": out},
                                                    indent=1) + "\n")
    _plot(out, folder / "trajectories.png")


def _us(x) -> str:
    return "   -   " if x is None else f"{x:7.0f}"


def _plot(rows: list[dict], path: Path) -> None:
    """Target intra blocks over the call (time as a fraction of each backend's call), hw ranks and
    the simulator's rank 0, with each backend's best static split."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(rows), figsize=(4.2 * len(rows), 3.4), squeeze=False)
    for ax, e in zip(axes[0], rows):
        for r, pts in e["hw_trajectory"].items():
            span = e["hw"]["adaptive_s"] * 1e6
            ax.step([t / span for t, _ in pts] + [1.0], [n for _, n in pts] + [pts[-1][1]], where="post",
                    color="tab:blue", alpha=0.5, lw=1, label="hw (each rank)" if r == "0" else None)
        span = e["sim"]["adaptive_s"] * 1e6
        pts = e["sim"]["trajectory"]
        ax.step([t / span for t, _ in pts] + [1.0], [n for _, n in pts] + [pts[-1][1]], where="post",
                color="tab:orange", lw=1.5, label="sim (rank 0)")
        ax.axhline(e["hw"]["best_split"], color="tab:blue", ls=":", label="best static, hw")
        ax.axhline(e["sim"]["best_split"], color="tab:orange", ls=":", label="best static, sim")
        ax.set_title(f"{e['kernel']} {e['size']}", fontsize=9)
        ax.set_xlabel("time / call time")
        ax.set_ylabel("target intra blocks")
        ax.set_ylim(-1, e["movable"] + 1)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="device part: run on the GPUs here, write OUT/hw.json")
    ap.add_argument("--sim", type=Path, help="simulator part: read SIM/hw.json, write compare.json and the plot")
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--gpus-per-node", type=int, default=2)
    ap.add_argument("--comm-sms", default="4,8,12,16,24")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--configs", default=",".join(f"{k}:{s}" for k, s in CONFIGS), help="op:size,...")
    args = ap.parse_args()
    if bool(args.out) == bool(args.sim):
        ap.error("give exactly one of --out (device part) and --sim (simulator part)")
    if args.out:
        configs = [(k, int(s)) for k, s in (x.split(":") for x in args.configs.split(","))]
        run_device(args.out, configs, args.nodes, args.gpus_per_node, [int(x) for x in args.comm_sms.split(",")],
                   args.iters)
    else:
        run_sim(args.sim)


if __name__ == "__main__":
    main()
