"""Where `internode = auto` (mkernel/builders/_rail.py::choose) runs a slower inter-node algorithm than
the best forced one, from a scaling sweep's results.jsonl (docs/scaling.md, 2026-12-04 section).

    python tools/studies/internode_misses.py docs/results/scaling-2026-12-04/results.jsonl [--margin 0.02]
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

GEMM_OPS = ("gemm_ar", "gemm_rs", "ag_gemm")


def misses(rows: list[dict], margin: float) -> tuple[int, list[tuple]]:
    """(points compared, the misses): per (op, cluster, size, nodes) of 8-GPU nodes, the plain point's
    speedup against the best forced algorithm's, where the best is more than ``margin`` ahead."""
    at: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for r in rows:
        opt = r.get("options", "")
        if r["kernel"] not in GEMM_OPS or r.get("gpus_per_node") != 8 or r["nodes"] < 2:
            continue
        if opt and not opt.startswith("internode="):
            continue
        at[(r["kernel"], r["testbed"].split("/")[-1], r["size"], r["nodes"])][opt.removeprefix("internode=") or "auto"] = r
    compared, out = 0, []
    for key, d in sorted(at.items()):
        if "auto" not in d or len(d) < 2:
            continue
        compared += 1
        best, alg = max((v["speedup"], a) for a, v in d.items() if a != "auto")
        if best > d["auto"]["speedup"] * (1 + margin):
            out.append((*key, d["auto"].get("internode"), d["auto"]["speedup"], alg, best))
    return compared, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, help="a sweep's results.jsonl, or its folder")
    ap.add_argument("--margin", type=float, default=0.02)
    a = ap.parse_args()
    if a.results.is_dir():
        a.results /= "results.jsonl"
    if not a.results.is_file():
        ap.error(f"results: {a.results} is not a file; give a sweep's results.jsonl or the folder holding it")
    rows = [json.loads(line) for line in a.results.read_text().splitlines() if line.strip()]
    compared, found = misses(rows, a.margin)
    print(f"{len(found)} of {compared} points: auto's algorithm more than {a.margin:.0%} behind the best forced one")
    print("| op | cluster | size | nodes | auto's pick | speedup | best | speedup |\n|---|---|---|---|---|---|---|---|")
    for op, cl, size, nodes, pick, s, alg, best in found:
        print(f"| {op} | {cl} | {size} | {nodes} | {pick} | {s:.2f} | {alg} | {best:.2f} |")


if __name__ == "__main__":
    main()
