"""Simulator speed benchmark (issues 3 and 30): every row of issue 30's table, in one run.

Each row is the command a user types, run as a child process; its CPU time (user + system, the
child's and its workers') and wall time are printed beside the figures issue 30 measured before the
work on it (CPU on a 2-core machine like CI's) and the goal. Simulated times come from the runs'
``--json`` so a speed-up that changes results shows.

Usage: python tools/bench/bench_sim_speed.py [--out result.json] [--skip ROW ...] [--only ROW ...]
[--sweep-workers 2] [--timeout 900] [--before earlier.json]

``--before`` takes another run's ``--out`` (the baseline commit's, measured in the same session on
the same machine) and prints its CPU and wall seconds beside each row instead of issue 30's figures.

Rows run as after a user's first run: the package's modules are compiled to bytecode first, and the
children do not inherit ``PYTHONDONTWRITEBYTECODE`` (with it set and no cache, each row compiled
mkernel's sources again: about 0.09 s CPU, 0.74 G instructions of the every-node row).

A row that runs past ``--timeout`` seconds is stopped (its process group killed) and reported as
timed out, so one slow row cannot hold the machine.

Rows (names for --skip): collapsed, uncollapsed, full, 64-nodes, default, ring-attention, sweep, scaleout.
The sweep row runs the whole scale-out study (now 1,481 points) into a temporary folder.

Issue 30's second row, "the same without ``--collapse``", was a run of every node when the issue was
written; its item 4 made collapsing the default where it is exact, so that command (row
``uncollapsed``) now runs collapsed. Row ``full`` is the run of every node as the issue measured
it, asked for with ``--no-collapse``: it tracks hazards member by member and keeps the issue's 3 s
goal too.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mkernel.sim import native  # (which core the rows run: the one this interpreter loads)

BIG = ["scenarios/paper-ib-2x8.toml", "--kernel", "gemm_ar", "--m", "32768", "--n", "32768", "--k", "2048"]
# name, command after `mkernel`, issue 30's figure before (CPU seconds; None: did not finish), goal (s)
ROWS = [
    ("collapsed", ["run", *BIG, "--collapse"], 50.6, 1.0),
    ("uncollapsed", ["run", *BIG], 138.0, 3.0),
    ("full", ["run", *BIG, "--no-collapse"], 138.0, 3.0),
    ("64-nodes", ["run", *BIG, "--nodes", "64", "--collapse"], 170.0, 5.0),
    ("default", ["run"], 9.5, 1.0),
    ("ring-attention", ["run", "paper-efa-2x8", "--kernel", "ring_attention", "--seq", "12288", "--n", "64",
                        "--k", "128", "--collapse"], None, 10.0),
    ("sweep", ["sweep", "--grid", "scaling"], 33 * 60.0, 300.0),
    ("scaleout", ["run", "scaleout/ib-400g-rail-64x8"], None, 10.0),
]
BEFORE_NOTE = {"ring-attention": "did not finish in 240 s", "scaleout": "did not finish in 300 s",
               "sweep": "33 min wall (2 workers)"}


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # (the rows' children: see above)


def compile_package() -> None:
    """mkernel's modules as bytecode, as its first run leaves them (an editable install's sources
    lie outside site-packages: the simulator and hw layers in folders of their own)."""
    import compileall

    import mkernel
    import mkernel.hw
    import mkernel.scenarios
    import mkernel.sim

    for path in {*mkernel.__path__, *mkernel.sim.__path__, *mkernel.hw.__path__, *mkernel.scenarios.__path__}:
        compileall.compile_dir(path, quiet=1)


def measure(name: str, args: list[str], tmp: Path, workers: int, timeout: float) -> dict:
    """Run ``mkernel ARGS`` once (at most ``timeout`` seconds); its CPU and wall seconds, and its
    simulated times."""
    out = tmp / f"{name}.json"
    pure = ["-X", native.PURE_OPTION] if native.PURE_OPTION in sys._xoptions else []  # (the rows run the core this does)
    cmd = [sys.executable, *pure, "-m", "mkernel", *args]
    if args[0] == "run":
        cmd += ["--json", str(out)]
    else:
        cmd += ["--workers", str(workers), "--out", str(tmp / name)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=ENV)
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the row's process and its sweep workers
        _, stderr = proc.communicate()
        stderr += f"\ntimed out after {timeout:.0f} s"
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    row = {"row": name, "command": "mkernel " + " ".join(args), "rc": proc.returncode, "cpu_s": round(cpu, 2),
           "wall_s": round(wall, 2)}
    if proc.returncode not in (0, 1):
        row["error"] = stderr.strip().splitlines()[-1:] or ["?"]
        log = tmp / name / "results.jsonl"
        if args[0] == "sweep" and log.exists():  # a stopped sweep: the points it finished (their workers'
            row["points"] = len(log.read_text().splitlines())  # CPU is lost with them: wall time only)
    elif args[0] == "run":
        result = json.loads(out.read_text())
        row.update(fused_us=result["time_s"] * 1e6, baseline_us=result["baseline"]["time_s"] * 1e6,
                   events=result["events"], collapsed=result.get("collapsed"), sim_core=result.get("sim_core"))
    else:
        rows = json.loads((tmp / name / "results.json").read_text())
        # which points failed, and why (the sweep's folder is temporary)
        failures = [{k: r.get(k) for k in ("key", "error")} for r in rows if "error" in r]
        row.update(points=len(rows), failed=len(failures), failures=failures)
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", help="write the rows and the machine's description here (JSON)")
    p.add_argument("--skip", nargs="*", default=[], choices=[r[0] for r in ROWS])
    p.add_argument("--only", nargs="*", default=[], choices=[r[0] for r in ROWS])
    p.add_argument("--sweep-workers", type=int, default=2)
    p.add_argument("--timeout", type=float, default=900.0, help="seconds a row may run before it is stopped")
    p.add_argument("--before", help="an earlier --out file whose rows are the before column")
    args = p.parse_args()
    earlier = {r["row"]: r for r in json.loads(Path(args.before).read_text())["rows"]} if args.before else {}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    meta = {"date": time.strftime("%Y-%m-%d"), "commit": commit, "python": platform.python_version(),
            "machine": f"{platform.machine()}, {platform.processor() or 'cpu unknown'}",
            "cores": len(os.sched_getaffinity(0)), "load_before": os.getloadavg()[0],
            "command": "python tools/bench/bench_sim_speed.py " + " ".join(sys.argv[1:]),
            "bytecode": "compiled before the rows (as after a first run)", "sim_core": native.state}
    compile_package()
    rows = []
    head = "before (--before)" if earlier else "before (issue 30)"
    print(f"simulator core: {native.state}")
    print(f"{'row':16} {head:>24} {'goal':>8} {'CPU now':>9} {'wall now':>9}  met  simulated (fused / baseline)")
    with tempfile.TemporaryDirectory() as tmp:
        for name, command, before, goal in ROWS:
            if name in args.skip or (args.only and name not in args.only):
                continue
            row = measure(name, command, Path(tmp), args.sweep_workers, args.timeout)
            row.update(before_cpu_s=before, goal_s=goal,
                       met=("error" not in row) and (row["wall_s"] if name == "sweep" else row["cpu_s"]) <= goal)
            rows.append(row)
            was = BEFORE_NOTE.get(name) or f"{before:.1f} s CPU"
            if name in earlier:
                e = earlier[name]
                row["before"] = {k: e.get(k) for k in ("cpu_s", "wall_s", "points", "error", "fused_us", "baseline_us")}
                was = f"{e['cpu_s']:.1f} s CPU, {e['wall_s']:.1f} s wall" + (" (stopped)" if "error" in e else "")
            sim = (f"{row['fused_us']:.2f} / {row['baseline_us']:.2f} us" if "fused_us" in row else
                   f"{row['points']} points, {row['failed']} failed"
                   + "".join(f"\n    failed: {f['key']}: {f['error']}"
                             for f in row["failures"]) if "failed" in row else
                   f"{row.get('points', 0)} points done; {row['error']}")
            print(f"{name:16} {was:>24} {goal:>7.0f}s {row['cpu_s']:>8.1f}s {row['wall_s']:>8.1f}s  "
                  f"{'yes' if row['met'] else 'no ':3}  {sim}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
