import json, sys
def load(d):
    rows = json.load(open(f"{d}/results.json"))
    return {r["key"]: r for r in rows}
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == b.keys(), (len(a), len(b))
moved = []
for k in a:
    for f in ("fused_us", "baseline_us", "paper_baseline_us", "events", "error"):
        if a[k].get(f) != b[k].get(f):
            moved.append((k, f, a[k].get(f), b[k].get(f)))
print(f"{len(a)} points; {len(moved)} fields differ (fused_us, baseline_us, paper_baseline_us, events, error compared exactly)")
for m in moved: print(m)
wa = sorted(((r.get("sim_wall_s", 0), k) for k, r in a.items()), reverse=True)[:8]
print("slowest points, sim_wall_s base -> branch:")
for w, k in wa: print(f"  {k}: {w:.1f} -> {b[k].get('sim_wall_s', 0):.1f}")
print("sum sim_wall_s", round(sum(r.get('sim_wall_s', 0) for r in a.values()), 1), "->", round(sum(r.get('sim_wall_s', 0) for r in b.values()), 1))
