"""The 24 scale-out points whose fused time moved most between two runs of the study, simulated again in this tree
(run on base c09f340 with the old profile and on main with the new proxy terms: which moves are the profile's).
usage (from a tree's root): python movers.py OLD/results.jsonl NEW/results.jsonl OUT.json
(here: docs/results/scaling-2026-12-05-s10b and docs/results/scaling-2026-12-06-s13 of main's tree)"""
import json, sys
from mkernel.studies import study, sweep
old, new = ({r["key"]: r for r in map(json.loads, open(path))} for path in sys.argv[1:3])
moved = sorted(((new[k]["fused_us"] / old[k]["fused_us"] - 1, k) for k in new
                if old[k].get("fused_us") and new[k].get("fused_us")), key=lambda x: abs(x[0]))
want = {k for _, k in moved[-24:]}
out = {p.key: sweep.run_point(p)["fused_us"] for p in study.grid() if p.key in want}
json.dump(out, open(sys.argv[3], "w"), indent=1)
