"""``mkernel sweep``: run the reference grid (or any grid), resumably, and tabulate and plot it.

Each point is one fused-vs-baseline run on the sim backend. Results are appended to
``results.jsonl`` in the output folder as they finish, so an interrupted sweep resumes where it
stopped; ``results.csv`` and ``speedup.png`` (one panel per op: speedup and TFLOPS per GPU against
size) are rewritten at the end.
"""
from __future__ import annotations

import csv
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from .problems import KERNELS
from .scenario import Scenario, check, load_scenario

TESTBEDS = ("paper-ib-2x8", "paper-efa-2x8")


@dataclass(frozen=True)
class Point:
    """One grid point: a testbed scenario, an op, and the size swept (the x axis)."""

    testbed: str
    kernel: str
    size: int  # M for the GEMM ops, the sequence per GPU for attention, tokens for MoE
    shape: tuple[tuple[str, int], ...]  # workload overrides

    @property
    def key(self) -> str:
        return f"{self.testbed}/{self.kernel}/{self.size}"


def reference_grid(testbeds=TESTBEDS, kernels=KERNELS, world: int = 16) -> list[Point]:
    """mkernel-design.md section 8: each op at five sizes, per-GPU shapes as at world 16."""
    sizes = {
        "ag_gemm": [4096, 8192, 16384, 24576, 32768],
        "gemm_rs": [2048, 4096, 8192, 16384, 32768],
        "gemm_ar": [2048, 4096, 8192, 16384, 32768],
        "ring_attention": [768, 1536, 3072, 6144, 12288],
        "moe_dispatch_gemm": [8192, 16384, 32768, 65536, 131072],
    }

    def shape(kernel: str, s: int) -> dict:
        if kernel == "ag_gemm":
            return dict(m=s, n=s // world, k=s)
        if kernel in ("gemm_rs", "gemm_ar"):
            return dict(m=s, n=s, k=s // world)
        if kernel == "ring_attention":  # B = 4 x 16 heads, D = 128; 4 query tiles per head
            return dict(m=s, n=64, k=128, tile_m=max(128, s // 4))
        return dict(m=s, n=2048, k=7168)

    return [Point(tb, kern, s, tuple(shape(kern, s).items()))
            for tb in testbeds for kern in kernels for s in sizes[kern]]


def scenario_of(point: Point) -> Scenario:
    sc = load_scenario(point.testbed)
    sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel=point.kernel, **dict(point.shape)))
    check(sc, f"sweep point {point.key}")
    return sc


def run_grid(points: list[Point], out: Path, progress=None) -> list[dict]:
    """Run every point not yet in ``out/results.jsonl``; return all rows (old and new)."""
    from .runner import run

    out.mkdir(parents=True, exist_ok=True)
    log = out / "results.jsonl"
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()] if log.exists() else []
    done = {r["key"] for r in rows}
    todo = [p for p in points if p.key not in done]
    for p in todo:
        result, _ = run(scenario_of(p), backend="sim", collapse=True)
        row = {"key": p.key, "testbed": p.testbed, "kernel": p.kernel, "size": p.size, **dict(p.shape),
               "fused_us": result["time_s"] * 1e6, "baseline": result["baseline"]["name"],
               "baseline_us": result["baseline"]["time_s"] * 1e6, "speedup": result["speedup"],
               "tflops_per_gpu": result["tflops_per_gpu"], "baseline_tflops_per_gpu": result["baseline"]["tflops_per_gpu"],
               "network_bytes_per_gpu": result["bytes_per_gpu"].get("network", 0.0),
               "compute_us": (result["breakdown"] or {}).get("compute"),
               "exposed_comm_us": (result["breakdown"] or {}).get("exposed_communication"),
               "sim_wall_s": result["wall_s"]}
        with log.open("a") as f:
            f.write(json.dumps(row) + "\n")
        rows.append(row)
        if progress is not None:
            progress(p)
    return rows


def write_table(rows: list[dict], out: Path) -> Path:
    path = out / "results.csv"
    keys = list(dict.fromkeys(k for row in rows for k in row))
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        writer.writeheader()
        for row in sorted(rows, key=lambda r: (r["testbed"], r["kernel"], r["size"])):
            writer.writerow(row)
    return path


def plot(rows: list[dict], out: Path) -> Path | None:
    """One panel per op: speedup (left axis) and TFLOPS per GPU (right axis) against size."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    kernels = [k for k in KERNELS if any(r["kernel"] == k for r in rows)]
    fig, axes = plt.subplots(1, len(kernels), figsize=(4.2 * len(kernels), 3.6), squeeze=False)
    twins = []
    for ax, kernel in zip(axes[0], kernels):
        twin = ax.twinx()
        twins.append(twin)
        for testbed, style in zip(sorted({r["testbed"] for r in rows}), ("-", "--")):
            pts = sorted((r for r in rows if r["kernel"] == kernel and r["testbed"] == testbed), key=lambda r: r["size"])
            xs = [r["size"] for r in pts]
            ax.plot(xs, [r["speedup"] for r in pts], "o" + style, color="C0", label=f"speedup {testbed}")
            twin.plot(xs, [r["tflops_per_gpu"] for r in pts], "s" + style, color="C1", label=f"fused TFLOPS {testbed}")
            twin.plot(xs, [r["baseline_tflops_per_gpu"] for r in pts], "x" + style, color="C2",
                      label=f"baseline TFLOPS {testbed}")
        ax.axhline(1.0, color="grey", lw=0.5)
        ax.set_xscale("log", base=2)
        ax.set_title(kernel)
        ax.set_xlabel("sequence per GPU" if kernel == "ring_attention" else "M")
        ax.set_ylabel("speedup (baseline / fused)", color="C0")
        twin.set_ylabel("TFLOPS per GPU", color="C1")
    (h1, l1), (h2, l2) = axes[0][0].get_legend_handles_labels(), twins[0].get_legend_handles_labels()
    fig.legend(h1 + h2, l1 + l2, loc="lower center", ncol=3, fontsize=7)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    path = out / "speedup.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
