"""Run the jitter-free efa gemm_ar 8192 point with the new max_min, checking each solve against the old one."""
import math
import mkernel.sim.flows as fl
ns = {"math": math, "Flow": fl.Flow, "Link": fl.Link}
exec(open("docs/results/data/sim-speed-2026-12-02/probes/max_min_1d67ccc.py").read(), ns)
old_mm, new_mm = ns["max_min"], fl.max_min
stats = {"solves": 0, "diff": 0, "worst": 0.0}
def both(flows):
    a, b = old_mm(flows), new_mm(flows)
    stats["solves"] += 1
    worst = max((abs(a[f] - b[f]) / max(abs(a[f]), 1e-300) for f in a if a[f] != b[f] and math.isfinite(a[f])), default=0.0)
    if worst > 0:
        stats["diff"] += 1
        if worst > stats["worst"]:
            stats["worst"] = worst
            if worst > 1e-9:
                print("solve", stats["solves"], "flows", len(flows), "worst", worst)
    return b if USE_NEW else a
fl.max_min = both
from mkernel.studies.sweep import Point, run_point
import sys
USE_NEW = sys.argv[1] == "new"
row = run_point(Point("paper-efa-2x8", "gemm_ar", 8192, (("m", 8192), ("n", 8192), ("k", 512)),
                      (("kernels", "reference"), ("nic.srd_jitter_us", 0.0))))
print(sys.argv[1], row["fused_us"], stats)
