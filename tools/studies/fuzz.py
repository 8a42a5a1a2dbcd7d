"""Fuzz the parsers and checkers (issue 10): many examples per target, outcome counts and findings.

Each target's invariant is in tests/harness/fuzz_targets.py: an input is accepted or refused with an
MkernelError; any other exception is a finding. Findings do not stop the run: each is recorded
with its exception and example, and the run exits 1 if there is any.

    python tools/studies/fuzz.py --examples 10000 --out docs/results/data/fuzz.json
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))


def run_target(name: str, strategy, target, examples: int, seed: int) -> dict:
    from hypothesis import HealthCheck, given, seed as hseed, settings

    outcomes: Counter = Counter()
    findings: list[dict] = []

    @hseed(seed)
    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def probe(example):
        try:
            outcomes[target(example)] += 1
        except Exception as exc:  # noqa: BLE001 - a finding, recorded and not re-raised
            outcomes["finding"] += 1
            if len(findings) < 20:
                findings.append({"error": f"{type(exc).__name__}: {exc}"[:400], "example": repr(example)[:400]})

    t0 = time.perf_counter()
    probe()
    return {"target": name, "examples": sum(outcomes.values()), "outcomes": dict(outcomes),
            "findings": findings, "wall_s": round(time.perf_counter() - t0, 1)}


def main() -> None:
    from hypothesis import strategies as st

    from harness.fuzz_targets import (command_target, proxy_garbage_target, ring_garbage, scenario_tables,
                                      scenario_target, schedule_edits, schedule_target)

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--only", help="run the targets whose name contains this text")
    args = ap.parse_args()
    targets = [("scenario parser", scenario_tables(), scenario_target),
               ("validate + hw plan (schedule edits)", schedule_edits(), schedule_target),
               ("ring command decoder", st.binary(min_size=48, max_size=48), command_target),
               ("garbage in the ring (native proxy)", ring_garbage(), proxy_garbage_target)]
    rows = [run_target(name, strategy, target, args.examples, args.seed) for name, strategy, target in targets
            if args.only is None or args.only in name]
    for r in rows:
        print(f"{r['target']:38} {r['examples']:7d} examples {r['wall_s']:7.1f} s  {r['outcomes']}")
        for f in r["findings"]:
            print(f"   FINDING {f['error']}\n      example {f['example']}")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    if args.out:
        args.out.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "commit": commit, "seed": args.seed,
                                        "command": " ".join(sys.argv), "targets": rows}, indent=1))
    sys.exit(1 if any(r["findings"] for r in rows) else 0)


if __name__ == "__main__":
    main()
