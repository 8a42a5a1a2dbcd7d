"""Simulated times pinned for CI: the reference grid's points that simulate in under a second, each
with the fused and baseline times the simulator gave when the table was written.

Why: the simulator's own tests compare two of its paths (grouped against flat, streaks against one
timer each), and an error in a function both paths share passes them; only recorded times catch it
(four of eleven planted run-phase errors, docs/results/2026-12-05-run-phase.md). Speed work must
leave these times alone; a deliberate model change rewrites the table, and says so in its commit:

    cd tests && python -m harness.pinned_times --write     # rerun every point, write the table (the pinned ones
                                                           # and any other that simulates within MAX_CPU_S)
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

TABLE = Path(__file__).parents[1] / "sim" / "data" / "pinned_times.json"
MAX_CPU_S = 1.0  # points slower than this on the writing machine are left to tools/studies/check_sim_times.py


def simulate(d: dict) -> tuple[float, float]:
    """(fused us, baseline us) of a row's point, as ``mkernel sweep`` runs it."""
    from mkernel.studies.sweep import Point, run_point

    row = run_point(Point.from_json(d))
    if "error" in row:
        raise RuntimeError(f"{row['key']}: {row['error']}")
    return row["fused_us"], row["baseline_us"]


def write() -> None:
    from mkernel.studies.sweep import reference_grid

    pinned = {row["key"] for row in json.loads(TABLE.read_text())["rows"]} if TABLE.exists() else set()
    rows = []
    for p in reference_grid():
        d = p.as_json()
        t0 = time.process_time()
        fused, baseline = simulate(d)
        # (a pinned point stays pinned: its time on a busy machine must not drop it from the table)
        if p.key in pinned or time.process_time() - t0 <= MAX_CPU_S:
            rows.append({"key": p.key, "def": d, "fused_us": fused, "baseline_us": baseline})
    doc = {"written_by": "cd tests && python -m harness.pinned_times --write", "rows": rows}
    TABLE.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(rows)} points pinned in {TABLE}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", required=True, help="rerun every point, rewrite the table")
    parser.parse_args()
    write()
