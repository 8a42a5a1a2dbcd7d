"""What-if run on main 4f49cff's builder (its 5-argument _zero_copy): every 2:1-spine MoE point of the scale-out study
(both profiles) with the committed rule, the rule priced at the spine's share for every pair, and each path forced."""
import sys, time, dataclasses
from mkernel.studies import study, sweep
from mkernel.builders import moe_dispatch_gemm as moe
rule = moe._zero_copy

def spine_rule(needed, tokens, stage_us_per_row, row_bytes, c):
    p, over = c.fabric.nodes_per_leaf, c.fabric.oversubscription
    share = min(1.0, 1.0 / (over * (c.nodes - p) / (c.nodes - 1))) if p and p < c.nodes else 1.0
    extra_us = (tokens - needed) * row_bytes / (c.nic.gb_per_s * share * 1e3)
    return extra_us < needed * stage_us_per_row

from mkernel.studies.scaleout import NODES
pts = [p for p in study.grid(kernels=["moe_dispatch_gemm"]) if "2to1" in p.key and "-2x8/" not in p.key]
pts += [p for cl in study.CLUSTERS if "2to1" in cl for n in NODES if n > 2
        for p in study._points(cl, n, 8, ["moe_dispatch_gemm"], [("kernels", "reference")])]
pts.sort(key=lambda p: p.key.count("64x8") * 4 + p.key.count("32x8") * 2 + p.key.count("16x8"))
for p in pts:
    out = []
    t0 = time.time()
    for name, f in (("rule", rule), ("spine", spine_rule), ("zc", lambda *a: True), ("staged", lambda *a: False)):
        moe._zero_copy = f
        r = sweep.run_point(p)
        out.append(f"{r['fused_us']:.1f}")
    moe._zero_copy = rule
    print(p.key, *out, f"{r['baseline_us']:.1f}", f"{time.time()-t0:.0f}s", flush=True)
