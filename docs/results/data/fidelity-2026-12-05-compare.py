"""Which reference-grid points moved between two grids (issue 29 item 5): fused, baseline and the paper's
baseline times, per point, above a relative threshold.  python THIS OLD/results.jsonl NEW/results.jsonl"""
import json
import sys


def rows(path):
    return {r["key"]: r for r in map(json.loads, open(path))}


old, new = rows(sys.argv[1]), rows(sys.argv[2])
moved = 0
for key in sorted(new):
    a, b = old.get(key), new[key]
    if a is None:
        print(f"{key}: new point"); continue
    for f in ("fused_us", "baseline_us", "paper_baseline_us"):
        if a.get(f) is None or b.get(f) is None:  # a refused point (an error row) in either grid
            if (a.get(f) is None) != (b.get(f) is None):
                moved += 1
                print(f"{key:55s} {f:18s} {a.get(f)} -> {b.get(f)}")
            continue
        if abs(b[f] / a[f] - 1) > 1e-6:
            moved += 1
            print(f"{key:55s} {f:18s} {a[f]:12.1f} -> {b[f]:12.1f} ({b[f] / a[f] - 1:+.2%})"
                  + (f"  [{a['paper_baseline']} -> {b['paper_baseline']}]" if f == "paper_baseline_us" else ""))
print(f"{len(new)} points, {moved} times moved by more than 1e-6")
