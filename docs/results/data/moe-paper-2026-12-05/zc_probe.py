"""The fused MoE at scale-out points with its zero-copy rule forced each way (docs/scaling.md, 2026-12-05 MoE
section).  python THIS KEY [KEY ...]   (keys of `mkernel sweep --grid scaling` points)"""
import sys
from mkernel.studies import study, sweep
from mkernel.builders import moe_dispatch_gemm as moe
keys = sys.argv[1:]
pts = {p.key: p for p in study.grid(kernels=["moe_dispatch_gemm"])}
rule = moe._zero_copy
for k in keys:
    out = []
    for name, f in (("rule", rule), ("zero-copy", lambda *a: True), ("staged", lambda *a: False)):
        moe._zero_copy = f
        r = sweep.run_point(pts[k])
        out.append(f"{name} {r['fused_us']:.1f}")
    moe._zero_copy = rule
    print(k, " | ".join(out), f"| baseline {r['baseline_us']:.1f}", flush=True)
