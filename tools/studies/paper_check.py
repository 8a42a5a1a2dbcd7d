"""The paper check in full: the reference grid on both testbeds with the reference kernel profile,
graded against the paper's quoted speedups (scenarios/paper/figures.toml, mkernel/studies/paper_check.py).

    python tools/studies/paper_check.py --out paper-check/ --workers 2      # every size (resumable)
    python tools/studies/paper_check.py --out paper-check/ --sizes 3        # the first three sizes of each op
    python tools/studies/paper_check.py --out paper-check/ --splits DIR/splits.json   # the GEMM ops at tuned splits

The tuned splits are what `mkernel sweep --comm-sms` picks per op and size, as the paper's benches tune
theirs per shape: `mkernel sweep --comm-sms $(seq -s, 4 4 96) --kernels ag_gemm gemm_ar gemm_rs
--set kernels=reference --out DIR` (about 15 minutes on 2 cores; docs/results/2026-12-05-paper-check.md).

Writes OUT/results.jsonl (the sweep rows) and OUT/paper_check.md (the table); exits 1 when a
figure is missed, 0 when all pass.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mkernel.studies import paper_check


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("paper-check"))
    p.add_argument("--sizes", type=int, default=None, help="only the first N sizes of each op")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--figures", type=Path, default=None, help="another figures table (default: the bundled one)")
    p.add_argument("--splits", type=Path, default=None,
                   help="a splits.json of `mkernel sweep --comm-sms`: the GEMM ops run its best split per point")
    args = p.parse_args(argv)
    figures, tolerance = paper_check.load(args.figures)
    rows = paper_check.run(figures, args.out, args.sizes, args.workers, tuned=args.splits)
    verdicts = paper_check.verdicts(figures, rows, tolerance)
    table = paper_check.report(verdicts)
    (args.out / "paper_check.md").write_text(table + "\n")
    print(table)
    return 0 if all(v.ok for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
