"""The NCCL model against the published nccl-tests figures (scenarios/nccl/published.toml):
the error of every point above 1 MiB, per curve (mkernel/studies/nccl_check.py, docs/nccl-model.md).

    python tools/studies/nccl_check.py            # the report with the committed terms (mkernel.nccl.TERMS)
    python tools/studies/nccl_check.py --fit      # refit each network's terms first, print them and the report

Exits 1 when a curve misses the 10% goal.
"""
from __future__ import annotations

import argparse
import sys

from mkernel import nccl
from mkernel.studies import nccl_check


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fit", action="store_true", help="refit the terms on the fit = true curves first")
    args = p.parse_args(argv)
    curves = nccl_check.load()
    terms = None
    if args.fit:
        terms = {net: nccl_check.fit(net, curves) for net in nccl.TERMS}
        for net, t in terms.items():
            print(f"{net}: {t}")
    print(nccl_check.report(curves, terms))
    return 0 if all(r["goal_met"] for r in nccl_check.summary(curves, terms)) else 1


if __name__ == "__main__":
    sys.exit(main())
