"""MoE speedup ranges per cluster, plain points (no options), 2-64 nodes: old vs new study."""
import json, sys
from collections import defaultdict

def load(p):
    return [json.loads(l) for l in open(p)]

def table(rows):
    out = defaultdict(lambda: {"speedup": [], "paper_speedup": []})
    for r in rows:
        if r["kernel"] != "moe_dispatch_gemm" or r["options"] not in ("", "kernels=reference") or "gb200" in r["testbed"] or "error" in r:
            continue
        cl = r["testbed"].split("/")[1].rsplit("-", 1)[0]
        for k in ("speedup", "paper_speedup"):
            out[cl][k].append(r[k])
    return out

old, new = table(load(sys.argv[1])), table(load(sys.argv[2]))
fmt = lambda v: f"{min(v):.2f}-{max(v):.2f} ({sum(x < 1 for x in v)} < 1)"
print("| cluster | ours: before | ours: now | paper's: before | paper's: now |\n|---|---|---|---|---|")
for cl in sorted(new):
    print(f"| {cl} | {fmt(old[cl]['speedup'])} | {fmt(new[cl]['speedup'])} | {fmt(old[cl]['paper_speedup'])} | {fmt(new[cl]['paper_speedup'])} |")
