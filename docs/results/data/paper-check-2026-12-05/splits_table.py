"""The GEMM ops with the split `mkernel sweep --comm-sms` picks, against the default split, per point.

    python docs/results/data/paper-check-2026-12-05/splits_table.py SPLITS.jsonl GRID/results.jsonl

SPLITS.jsonl: the log of a split sweep (every (point, intra SMs) fused time); GRID: the paper check's
rows of the same kernel profile (the default split's fused time and the paper's baseline). Prints, per
op, testbed and size: the default split's intra SMs and speedup, the best split's, and the change.
"""
from __future__ import annotations

import json
import sys
from collections import defaultdict

from mkernel import builders
from mkernel.ir import Role
from mkernel.studies import sweep


def default_intra(row: dict) -> int:
    """The intra SMs the op's builder gives the point (its default split, or GEMM+RS's auto split)."""
    point = sweep.Point(row["testbed"], row["kernel"], row["size"], tuple((k, row[k]) for k in ("m", "n", "k")),
                        (("kernels", row["kernels"]),))
    sc = sweep.scenario_of(point)
    return builders.get(row["kernel"])._roles(sc.workload, sc.cluster)[Role.INTRA]


def main(log: str, grid: str) -> None:
    curves: dict[tuple[str, str, int], dict[int, float]] = defaultdict(dict)
    for line in open(log):
        r = json.loads(line)
        testbed, kernel, size = r["point"].split(":", 1)[1].split("/")[:3]
        curves[(testbed, kernel, int(size))][r["sms"]] = r["time_s"] * 1e6
    rows = {(r["testbed"], r["kernel"], r["size"]): r for r in map(json.loads, open(grid))}
    print("| testbed | op | size | default: intra SMs, fused us, speedup | tuned: intra SMs, fused us, speedup | change |")
    print("|---|---|---|---|---|---|")
    for key in sorted(curves, key=lambda k: (k[1], k[0], k[2])):
        curve, row = curves[key], rows.get(key)
        if row is None:
            continue
        best = min(curve, key=curve.get)
        default = default_intra(row)
        if default in curve:  # the sweep ran the default split: its time is the grid's
            assert abs(curve[default] - row["fused_us"]) < 1e-6 * row["fused_us"], (key, curve[default], row["fused_us"])
        base = row["paper_baseline_us"]
        print(f"| {key[0]} | {key[1]} | {key[2]} | {default}, {row['fused_us']:.0f}, "
              f"{base / row['fused_us']:.2f}x | {best}, {curve[best]:.0f}, {base / curve[best]:.2f}x | "
              f"{row['fused_us'] / curve[best] - 1:+.1%} |")


if __name__ == "__main__":
    main(*sys.argv[1:])
