import json, sys, collections
a = {json.loads(l)["key"]: json.loads(l) for l in open(sys.argv[1])}
b = {json.loads(l)["key"]: json.loads(l) for l in open(sys.argv[2])}
by = collections.defaultdict(lambda: [0, 0, 0])
moved = 0
for k in a:
    x, y = a[k], b[k]
    kern = k.split("/")[2]
    by[kern][0] += x["cpu"]; by[kern][1] += y["cpu"]; by[kern][2] += 1
    for f in ("fused_us", "baseline_us"):
        if x[f] != y[f]:
            moved += 1; print("MOVED", k, f, x[f], y[f])
ta = sum(v[0] for v in by.values()); tb = sum(v[1] for v in by.values())
print(f"total {ta:.1f} -> {tb:.1f}  ({len(a)} points, {moved} moved)")
for k, v in sorted(by.items()): print(f"  {k:20} {v[2]:4} {v[0]:7.1f} -> {v[1]:7.1f}")
top = sorted(b, key=lambda k: -b[k]["cpu"])[:12]
for k in top: print(f"  {b[k]['cpu']:6.2f} (main {a[k]['cpu']:6.2f}) {k}")
