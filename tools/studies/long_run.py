"""Issue 10's long run: many consecutive calls mixing the five fused ops on an emulated cluster,
every output checked, memory / open files / threads compared before and after.

    python tools/studies/long_run.py --calls 10000 --nodes 2 --gpn 2 --out long_run.json   (GPU machine)

Epochs are 64-bit counters bumped once per call: no wraparound exists within any run's reach
(2^64 calls), so none is exercised.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))


def main() -> None:
    from harness import long_run
    from harness.cases import CASES, workload
    from harness.rank import TOLERANCE

    from mkernel.hw.runtime.emulate import launch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--gpn", type=int, default=2)
    ap.add_argument("--cases", default=",".join(sorted(CASES)), help="comma-separated subset of the fused tests' cases")
    ap.add_argument("--sms", type=int, default=132, help="SMs the ranks of one GPU share (the launcher's sms)")
    ap.add_argument("--sync-every", type=int, default=0, help="host waits for the GPU every N calls (0: never)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    unknown = set(a.cases.split(",")) - set(CASES)
    if unknown:
        ap.error(f"--cases: {', '.join(sorted(unknown))} not among {', '.join(sorted(CASES))}")
    cases = {name: workload(name) for name in a.cases.split(",")}
    t0 = time.time()
    res = launch(long_run.long_run_rank, a.nodes * a.gpn, args=(cases, a.nodes, a.gpn, a.calls, a.sync_every), timeout_s=3000,
                 sms=a.sms)
    wall = time.time() - t0
    for r in res:  # exact outputs, no error, and no memory, file or thread left behind
        r["ok"] = (not r["errors"] and all(e <= TOLERANCE for e in r["worst_error"].values())
                   and r["after"]["allocated"] <= r["middle"]["allocated"] and r["after"]["fds"] <= r["before"]["fds"]
                   and r["after"]["threads"] <= r["before"]["threads"])
        print(f"rank {r['rank']}: ok={r['ok']} worst={max(r['worst_error'].values()):.2e} before={r['before']} "
              f"after={r['after']} warmup={r['warmup']}")
        for name, error in r["errors"].items():
            print(f"rank {r['rank']} {name}: {error}; transfers {r['transfers'].get(name)}")
    commit = Path(".commit").read_text().strip() if Path(".commit").is_file() else "unknown"
    if a.out:
        a.out.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "commit": commit, "wall_s": wall,
                                     "command": " ".join(sys.argv), "ranks": res}, indent=1))
    sys.exit(0 if all(r["ok"] for r in res) else 1)


if __name__ == "__main__":
    main()
