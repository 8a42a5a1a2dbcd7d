"""Simulated times against a recorded baseline (issue 30): speed work must not move them.

``record`` runs a seeded slice of the reference grid (``mkernel sweep``), a seeded slice of the
scale-out study (``mkernel sweep --grid scaling``) and the rows of issue 30's speed table, and
writes every point's definition and its fused and baseline times (plus CPU and wall seconds) to a
JSON file. ``compare`` reruns exactly the points of such a file on the code at hand and prints
every point whose fused or baseline time moved by more than ``--tol`` (relative), and how many
moved at all; it exits 1 if any moved beyond the tolerance.

    python tools/studies/check_sim_times.py record --out base.json --ref 20 --scaling 40 --seed 30
    python tools/studies/check_sim_times.py compare base.json [--only reference,scaling] [--tol 0.005]
    python tools/studies/check_sim_times.py committed docs/results/scaling-2026-12-02 [--sample 40 --seed 30]
    python tools/studies/check_sim_times.py diff before.json after.json [--tol 0.005]

``committed`` does what ``compare`` does against a committed sweep folder's ``results.jsonl``
(every row, or a seeded sample): each row's point is rebuilt from the row (its shape is the fields
the sweep writes between ``size`` and ``nodes``, its options the ``options`` string).

``diff`` compares two files that ``--out`` wrote (two codes' reruns of the same points, say the
baseline commit's and a branch's), running nothing: every point's move, and its CPU before and after.

Grid points run as the sweep runs them (:func:`mkernel.studies.sweep.run_point`: collapsed where exact);
table rows run through :func:`mkernel.runner.run` with the row's own ``collapse``.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import random
import subprocess
import sys
import time

TABLE = {  # issue 30's rows: scenario, cluster and workload overrides, collapse
    "gemm_ar 2x8 32768^2 k2048 collapsed": ("paper-ib-2x8", {}, dict(kernel="gemm_ar", m=32768, n=32768, k=2048), True),
    "gemm_ar 2x8 32768^2 k2048 full": ("paper-ib-2x8", {}, dict(kernel="gemm_ar", m=32768, n=32768, k=2048), False),
    "gemm_ar 64x8 32768^2 k2048 collapsed": ("paper-ib-2x8", {"nodes": 64},
                                             dict(kernel="gemm_ar", m=32768, n=32768, k=2048), True),
    "default full": ("default", {}, {}, False),
    "ring_attention efa 2x8 seq 12288 collapsed": ("paper-efa-2x8", {}, dict(kernel="ring_attention", m=12288, n=64,
                                                                             k=128, tile_m=256), True),
    "scaleout/ib-400g-rail-64x8 (its workload)": ("scaleout/ib-400g-rail-64x8", {}, {}, True),
}


def table_scenario(name: str):
    from mkernel.scenario import check, load_scenario

    spec, cluster, workload, _ = TABLE[name]
    sc = load_scenario(spec)
    sc = dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, **cluster),
                             workload=dataclasses.replace(sc.workload, **workload))
    check(sc, name)
    return sc


def run_entry(entry: dict) -> dict:
    """Run one recorded point (its ``set`` and definition); return its times and costs."""
    cpu, wall = time.process_time(), time.perf_counter()
    if entry["set"] == "table":
        from mkernel.runner import run

        result, _ = run(table_scenario(entry["key"]), backend="sim", collapse=TABLE[entry["key"]][3])
        out = {"fused_us": result["time_s"] * 1e6, "baseline_us": result["baseline"]["time_s"] * 1e6,
               "events": result["events"]}
    else:
        from mkernel.studies.sweep import Point, run_point

        row = run_point(Point.from_json(entry["def"]))
        out = ({"error": row["error"]} if "error" in row else
               {"fused_us": row["fused_us"], "baseline_us": row["baseline_us"], "events": row["events"]})
    return {**out, "cpu_s": round(time.process_time() - cpu, 3), "wall_s": round(time.perf_counter() - wall, 3)}


def _entries(ref: int, scaling: int, seed: int, rows: list[str]) -> list[dict]:
    from mkernel.studies.study import grid
    from mkernel.studies.sweep import reference_grid

    out = []
    for name, points, n in (("reference", reference_grid(), ref), ("scaling", grid(), scaling)):
        for p in random.Random(seed).sample(points, min(n, len(points))):
            out.append({"set": name, "key": p.key, "def": p.as_json()})
    out += [{"set": "table", "key": name} for name in rows]
    return out


def committed_entries(folder: str, sample: int, seed: int, max_wall: float = 0.0) -> list[dict]:
    """The rows of a committed sweep (``folder``/results.jsonl) as entries to rerun: all of them,
    or ``sample`` of them drawn with ``seed``, of those whose recorded simulation took at most
    ``max_wall`` seconds (0: any); rows with an error are rerun too (it must recur)."""
    from pathlib import Path

    from mkernel.studies.sweep import Point, parse_options

    rows = [json.loads(line) for line in (Path(folder) / "results.jsonl").read_text().splitlines() if line.strip()]
    if max_wall:
        rows = [r for r in rows if r.get("sim_wall_s", 0.0) <= max_wall]
    if sample:
        rows = random.Random(seed).sample(rows, min(sample, len(rows)))
    out = []
    for row in rows:
        names = list(row)
        shape = [[k, row[k]] for k in names[names.index("size") + 1:names.index("nodes")]]
        # (each KEY=VALUE read as the sweep reads --set: proxy.batch=1 is an int again; a text option that reads
        # as a number would come back a number, which no option of the sweeps has)
        options = [list(o) for opt in row["options"].split(",") if opt for o in parse_options([opt])[0]]
        d = {"testbed": row["testbed"], "kernel": row["kernel"], "size": row["size"], "shape": shape,
             "options": options}
        if Point.from_json(d).key != row["key"]:
            raise SystemExit(f"{folder}: row {row['key']} does not rebuild its point (got {Point.from_json(d).key})")
        kept = {k: row[k] for k in ("fused_us", "baseline_us", "events", "error") if k in row}
        out.append({"set": Path(folder).name, "key": row["key"], "def": d, **kept,
                    "cpu_s": None if "sim_wall_s" not in row else f"{row['sim_wall_s']:.3f} (sim wall)"})
    return out


def compare(todo: list[dict], tol: float, out: str | None, meta: dict, base_meta) -> int:
    """Rerun ``todo`` (entries with their recorded times); print each point's move and the ones
    beyond ``tol``; 1 if any moved beyond it."""
    moved, changed, rerun = [], 0, []
    for i, e in enumerate(todo):
        now = run_entry(e)
        rerun.append({**{k: e[k] for k in ("set", "key", "def") if k in e}, **now})
        worst = 0.0
        for field in ("fused_us", "baseline_us"):
            if field in e and field in now:
                worst = max(worst, abs(now[field] - e[field]) / e[field])
        if "error" in e or "error" in now:
            worst = 0.0 if e.get("error") == now.get("error") else float("inf")
        changed += worst > 1e-12
        line = (f"[{i + 1}/{len(todo)}] {e['set']} {e['key']}: fused {e.get('fused_us', 0):.3f} -> "
                f"{now.get('fused_us', 0):.3f} us, baseline {e.get('baseline_us', 0):.3f} -> "
                f"{now.get('baseline_us', 0):.3f} us (worst {worst:.2e}); cpu {e.get('cpu_s')} -> {now['cpu_s']} s")
        print(line, flush=True)
        if worst > tol:
            moved.append(line)
        if out:  # rewritten after every point: a killed run keeps what it has
            with open(out, "w") as f:
                json.dump({"meta": meta, "baseline": base_meta, "entries": rerun}, f, indent=1)
    print(f"{len(todo)} points rerun; {changed} changed at all; {len(moved)} moved more than {tol:.1%}")
    for line in moved:
        print("  MOVED " + line)
    return 1 if moved else 0


def diff(before: str, after: str, tol: float) -> int:
    """Each point of ``after`` against the same point of ``before`` (both ``--out`` files); 1 if any
    moved beyond ``tol``."""
    old = {(e["set"], e["key"]): e for e in json.load(open(before))["entries"]}
    moved = changed = 0
    cpu = [0.0, 0.0]
    for e in json.load(open(after))["entries"]:
        o = old[(e["set"], e["key"])]
        worst = max((abs(e[f] - o[f]) / o[f] for f in ("fused_us", "baseline_us") if f in e and f in o), default=0.0)
        if "error" in e or "error" in o:
            worst = 0.0 if e.get("error") == o.get("error") else float("inf")
        changed += worst > 1e-12
        moved += worst > tol
        cpu = [cpu[0] + o["cpu_s"], cpu[1] + e["cpu_s"]]
        print(f"{e['set']} {e['key']}: worst move {worst:.2e}; cpu {o['cpu_s']:.2f} -> {e['cpu_s']:.2f} s"
              + ("  MOVED" if worst > tol else ""))
    print(f"{len(old)} points; {changed} changed at all; {moved} moved more than {tol:.1%}; "
          f"cpu {cpu[0]:.1f} -> {cpu[1]:.1f} s")
    return 1 if moved else 0


def _meta(command: str) -> dict:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    return {"date": time.strftime("%Y-%m-%d %H:%M"), "commit": commit, "python": platform.python_version(),
            "machine": f"{platform.machine()}, {platform.processor() or 'cpu unknown'}", "command": command}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("--out", required=True)
    rec.add_argument("--ref", type=int, default=20, help="reference-grid points (seeded sample)")
    rec.add_argument("--scaling", type=int, default=40, help="scale-out study points (seeded sample)")
    rec.add_argument("--seed", type=int, default=30)
    rec.add_argument("--rows", default="all", help="table rows: all, none, or names separated by ';'")
    cmp_ = sub.add_parser("compare")
    cmp_.add_argument("baseline")
    cmp_.add_argument("--only", default="", help="sets to rerun: reference, scaling, table (comma-separated)")
    cmp_.add_argument("--skip", default="", help="table rows to skip (names separated by ';')")
    cmp_.add_argument("--tol", type=float, default=0.005)
    cmp_.add_argument("--out", help="write the rerun's rows here")
    com = sub.add_parser("committed")
    com.add_argument("folder", help="a committed sweep's folder (with results.jsonl)")
    com.add_argument("--sample", type=int, default=0, help="rerun this many rows (seeded sample); 0: all")
    com.add_argument("--seed", type=int, default=30)
    com.add_argument("--max-wall", type=float, default=0.0,
                     help="only rows whose recorded sim_wall_s is at most this (0: every row)")
    com.add_argument("--tol", type=float, default=0.005)
    com.add_argument("--out", help="write the rerun's rows here")
    dif = sub.add_parser("diff")
    dif.add_argument("before", help="a --out file: the points rerun on one code")
    dif.add_argument("after", help="a --out file: the same points rerun on another")
    dif.add_argument("--tol", type=float, default=0.005)
    args = p.parse_args(argv)
    command = "python tools/studies/check_sim_times.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.cmd == "record":
        rows = list(TABLE) if args.rows == "all" else [] if args.rows == "none" else args.rows.split(";")
        entries = _entries(args.ref, args.scaling, args.seed, rows)
        for i, e in enumerate(entries):
            e.update(run_entry(e))
            print(f"[{i + 1}/{len(entries)}] {e['set']} {e['key']}: "
                  + json.dumps({k: v for k, v in e.items() if k not in ("set", "key", "def")}), flush=True)
            with open(args.out, "w") as f:  # rewritten after every point: a killed run keeps what it has
                json.dump({"meta": _meta(command), "entries": entries[:i + 1]}, f, indent=1)
        return 0
    if args.cmd == "diff":
        return diff(args.before, args.after, args.tol)
    if args.cmd == "committed":
        todo = committed_entries(args.folder, args.sample, args.seed, args.max_wall)
        return compare(todo, args.tol, args.out, _meta(command), {"folder": args.folder})
    base = json.load(open(args.baseline))
    only = set(filter(None, args.only.split(",")))
    skip = set(filter(None, args.skip.split(";")))
    todo = [e for e in base["entries"] if (not only or e["set"] in only) and e["key"] not in skip]
    return compare(todo, args.tol, args.out, _meta(command), base["meta"])


if __name__ == "__main__":
    sys.exit(main())
