"""CPU time of the hazard tracker's construction (LoggedTracker.__init__) and of finish() after a
tracked run's log, for the 2 x 8 GEMM+AR 32768^2 every-node schedule. Usage: python time_init.py [REPS]"""
import dataclasses
import sys
import time

from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import hazardlog

sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
mk, c = builders.get("gemm_ar"), sc.cluster
with ir.paused_gc():
    fused = mk.build(w, c, grouped=True)
    table = fused.validate()
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
best = []
for _ in range(reps):
    t = time.process_time()
    with ir.paused_gc():
        tr = hazardlog.LoggedTracker(fused, table)
    best.append(time.process_time() - t)
    del tr
print("init", " ".join(f"{x:.3f}" for x in best), "min", f"{min(best):.3f}")
