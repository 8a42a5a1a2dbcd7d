"""The auto study's tables (mkernel/studies/autopick.py) and the out-of-sample check of the estimate
rule auto falls back on without a simulator (mkernel/studies/holdout.py).

Usage (CPU, from the repository root), after the study's run (docs/results/2026-12-04-auto.md):
  python tools/studies/auto_holdout.py --estimate   # once: the model's estimates of the forced-fused
                                                    # points -> DATA/estimates.jsonl (builds, no simulation)
  python tools/studies/auto_holdout.py              # the tables (markdown) from results.jsonl + estimates.jsonl
"""
from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

DATA = Path("docs/results/auto-2026-12-04")


def write_estimates(folder: Path) -> None:
    from mkernel.studies import study
    from mkernel.studies.holdout import FORCED, estimate

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    points = [p for p in study.auto_points() if ",".join(f"{k}={v}" for k, v in p.options).endswith(FORCED)]
    with (folder / "estimates.jsonl").open("w") as f:
        for p in points:
            f.write(json.dumps({**estimate(p), "commit": commit}) + "\n")
    print(f"{len(points)} estimates -> {folder / 'estimates.jsonl'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--estimate", action="store_true", help="compute and store the estimates, then stop")
    a = ap.parse_args()
    if a.estimate:
        write_estimates(a.data)
        return
    from mkernel.studies import autopick, holdout

    pairs = autopick.pairs(a.data)
    print("## auto on the study (simulated choice)\n\n" + autopick.summary(pairs))
    print("## Where no fused schedule wins\n\n" + autopick.losing_table(pairs))
    print("## The estimate rule without a simulator\n\n" + holdout.report(holdout.load_cases(a.data)))


if __name__ == "__main__":
    main()
