"""The scale-out sweep's points that main's and the branch's sweep rows both finished: every simulated
time compared (fused, baseline, paper baseline); argv: main's and the branch's sweep-*-points.jsonl (or the sweeps' results.jsonl)"""
import json, sys
main, branch = ({r["key"]: r for r in map(json.loads, open(f))} for f in sys.argv[1:3])
common = sorted(main.keys() & branch.keys())
moved, worst = [], 0.0
for k in common:
    a, b = main[k], branch[k]
    if ("error" in a) != ("error" in b):
        print(f"{k}: main {a.get('error', 'ran')[:100]} | branch {b.get('error', 'ran')[:100]}")
        continue
    for f in ("fused_us", "baseline_us", "paper_baseline_us"):
        x, y = a.get(f), b.get(f)
        if x is None or y is None or x == y:
            continue
        rel = abs(y - x) / abs(x)
        worst = max(worst, rel)
        moved.append((k, f, x, y, rel))
for k, f, x, y, rel in moved:
    print(f"{k} {f}: {x:.3f} -> {y:.3f} ({rel:.2e})")
print(f"{len(common)} points in both; {len(moved)} times changed at all; worst relative move {worst:.2e}")
