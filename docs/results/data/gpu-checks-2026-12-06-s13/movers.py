"""The scale-out points whose fused time moved most between scaling-2026-12-05-s10b and -2026-12-06-s13, run again
in this tree (base c09f340 with the old profile, or main with the new proxy terms): which moves are the profile's.
usage (from a tree's root): python movers.py OUT.json"""
import json, sys, statistics
from mkernel.studies import study, sweep
old = {r["key"]: r for r in map(json.loads, open("/work/main/docs/results/scaling-2026-12-05-s10b/results.jsonl"))}
new = {r["key"]: r for r in map(json.loads, open("/work/main/docs/results/scaling-2026-12-06-s13/results.jsonl"))}
ch = sorted(((new[k]["fused_us"] / old[k]["fused_us"] - 1, k) for k in new if old[k].get("fused_us") and new[k].get("fused_us")),
            key=lambda x: abs(x[0]))
want = {k for _, k in ch[-24:]}
points = [p for p in study.grid() if p.key in want]
out = {}
for p in points:
    out[p.key] = sweep.run_point(p)["fused_us"]
json.dump(out, open(sys.argv[1], "w"), indent=1)
