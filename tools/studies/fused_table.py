"""Run each fused op at world 1 and on an emulated cluster and print a table of errors and times.

Usage (GPU machine): python3 tools/studies/fused_table.py --nodes 2 --gpn 2 [--cases gemm_ar,...] [--calls 3]
The emulated cluster's times are not NVLink or NIC times (EMULATION_NOTE); this tool checks
correctness across many shapes, the benchmarks time things.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))


def main() -> None:
    from harness import rank
    from harness.cases import CASES, workload

    from mkernel.hw.runtime.emulate import launch

    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--gpn", type=int, default=2)
    ap.add_argument("--cases", default=",".join(sorted(CASES)))
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    rows = []
    for case in a.cases.split(","):
        try:
            res = launch(rank.run_rank, a.nodes * a.gpn, args=(workload(case), a.nodes, a.gpn, 11, a.calls),
                         timeout_s=300)
            worst = max(max(r["errors"].values()) for r in res)
            exact = worst <= rank.TOLERANCE and not any(any(r["unwritten"].values()) for r in res)
            rows.append({"case": case, "ok": exact, "worst_error": worst,
                         "unwritten": sum(sum(r["unwritten"].values()) for r in res), "epoch": res[0]["epoch"],
                         "blocks": res[0]["blocks"], "ranks": res})
        except Exception as e:  # noqa: BLE001 - the table shows the failure and goes on
            rows.append({"case": case, "ok": False, "error": str(e)[-2000:]})
    print(f"{'case':24} {'ok':>4} {'worst rel err':>14} {'NaN':>5} {'epoch':>6}  blocks (compute, intra, send, recv)")
    for r in rows:
        if "error" in r:
            print(f"{r['case']:24} FAIL  {r['error'][-600:]}")
        else:
            print(f"{r['case']:24} {str(r['ok']):>4} {r['worst_error']:14.3e} {r['unwritten']:5d} {r['epoch']:6d}  "
                  f"{r['blocks']}")
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1, default=str))


if __name__ == "__main__":
    main()
