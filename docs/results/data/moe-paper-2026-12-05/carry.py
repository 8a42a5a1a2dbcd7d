"""A seeded sample of a scaling folder's non-MoE rows rerun on the code at hand (docs/scaling.md, 2026-12-05 MoE
section).  python THIS FOLDER/results.jsonl N"""
import json, random, sys
from mkernel.studies import study, sweep
rows = {json.loads(l)["key"]: json.loads(l) for l in open(sys.argv[1])}
pts = {p.key: p for p in study.grid()}
keys = sorted(k for k, r in rows.items() if r["kernel"] != "moe_dispatch_gemm" and k in pts and "fused_us" in r)
moved = 0
for k in random.Random(29).sample(keys, int(sys.argv[2])):
    r = sweep.run_point(pts[k])
    d = max(abs(r[f] / rows[k][f] - 1) for f in ("fused_us", "baseline_us"))
    moved += d > 1e-9
    print(f"{k} fused {rows[k]['fused_us']:.3f} -> {r['fused_us']:.3f} baseline {rows[k]['baseline_us']:.3f} -> {r['baseline_us']:.3f} rel {d:.1e}", flush=True)
print(f"moved: {moved}")
