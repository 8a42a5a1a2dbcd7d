"""Scale-out study, two runs compared (either kernel profile): moved times by op, field and transport, and the plain
points' speedup range, median and points below 1.0 per op and fabric.  python THIS OLD/results.jsonl NEW/results.jsonl"""
import json, statistics, collections, sys
def rows(p): return {r["key"]: r for r in map(json.loads, open(p))}
old, new = rows(sys.argv[1]), rows(sys.argv[2])
mv = collections.Counter(); rng = collections.defaultdict(list)
for k, b in new.items():
    a = old[k]
    for f in ("fused_us", "baseline_us"):
        if a.get(f) and b.get(f) and abs(b[f]/a[f]-1) > 1e-6:
            mv[(b["kernel"], f, b["transport"])] += 1
            rng[(b["kernel"], f)].append(b[f]/a[f]-1)
for k, v in sorted(mv.items()): print(k, v)
for k, v in sorted(rng.items()): print(k, f"{min(v):+.1%} .. {max(v):+.1%}")
# plain points: rail and 2:1 clusters, no options
def table(rs):
    out = {}
    for r in rs.values():
        if r["options"] not in ("", "kernels=reference") or r.get("speedup") is None or "gb200" in r["testbed"]: continue
        fab = "IB" if r["transport"].startswith("ib") else "EFA"
        out.setdefault((r["kernel"], fab), []).append(r["speedup"])
    return out
to, tn = table(old), table(new)
for k in sorted(tn):
    o, n = to[k], tn[k]
    print(k, len(n), f"{min(o):.2f}-{max(o):.2f} -> {min(n):.2f}-{max(n):.2f}", f"median {statistics.median(o):.2f} -> {statistics.median(n):.2f}", f"below1 {sum(x<1 for x in o)} -> {sum(x<1 for x in n)}")
