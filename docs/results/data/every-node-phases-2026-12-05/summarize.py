"""Medians of measure.sh's rounds: the CLI's CPU (user + sys) and wall from /usr/bin/time, and each phase of
phases.py, main against the branch; then the DETAIL runs' parts, where present. usage: summarize.py MEASURE_DIR"""
import glob
import json
import statistics
import sys

out = sys.argv[1]


def cli(code):
    rows = []
    for f in sorted(glob.glob(f"{out}/cli-{code}-*.time")):
        user, _, sys_, _, wall, _, rss, _ = open(f).read().split()
        rows.append((float(user) + float(sys_), float(wall), int(rss) // 1024))
    return rows


for code in ("main", "branch"):
    rows = cli(code)
    print(f"CLI {code}: CPU {[r[0] for r in rows]} median {statistics.median(r[0] for r in rows):.2f}; "
          f"wall {[r[1] for r in rows]}; max RSS {rows[0][2]} MB")
for prefix in ("phases", "detail"):
    table: dict = {}
    for code in ("main", "branch"):
        for f in sorted(glob.glob(f"{out}/{prefix}-{code}-*.txt")):
            for k, v in json.loads(open(f).read().splitlines()[0]).items():
                table.setdefault(k, {}).setdefault(code, []).append(v)
    for k, v in table.items():
        m, b = v.get("main", []), v.get("branch", [])
        med = [f"{statistics.median(x):.3f}" if x else "-" for x in (m, b)]
        print(f"{prefix:6s} {k:48s} main {med[0]} {m} | branch {med[1]} {b}")
