"""Medians of measure.sh's rounds: the row's CLI CPU (user + sys) and wall, the tracked run's CPU with and without the
hazard grids, per code, and each round's branch - main. usage: summarize.py [measure dir]"""
import re, statistics, sys
from pathlib import Path
d = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/results/data/network-events-2026-12-05/measure")
rows = {}
for f in sorted(d.glob("cli-*-*.txt")):
    code, r = f.stem.split("-")[1:]
    u, s, wall = map(float, re.search(r"cpu ([\d.]+) \+ ([\d.]+) s, wall ([\d.]+)", f.read_text()).groups())
    run = re.search(r"(\d+) run ([\d.]+) grids ([\d.]+) run-without-grids ([\d.]+)", (d / f"run-{code}-{r}.txt").read_text())
    rows.setdefault(code, {})[int(r)] = dict(cli=u + s, wall=wall, events=int(run[1]), run=float(run[2]),
                                             grids=float(run[3]), bare=float(run[4]))
keys = ("cli", "wall", "run", "grids", "bare")
print("round  " + "  ".join(f"{k:>14}" for k in keys) + "   (main / branch)")
for r in sorted(rows["main"]):
    print(f"{r:5}  " + "  ".join(f"{rows['main'][r][k]:6.2f} / {rows['branch'][r][k]:5.2f}" for k in keys))
print("median " + "  ".join(f"{statistics.median(x[k] for x in rows['main'].values()):6.2f} / "
                           f"{statistics.median(x[k] for x in rows['branch'].values()):5.2f}" for k in keys))
print("median of branch - main per round: " + ", ".join(
    f"{k} {statistics.median(rows['branch'][r][k] - rows['main'][r][k] for r in rows['main']):+.2f}" for k in keys))
print("events", {c: sorted({x['events'] for x in v.values()}) for c, v in rows.items()})
