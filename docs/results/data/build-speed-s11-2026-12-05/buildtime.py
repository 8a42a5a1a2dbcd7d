"""CPU time of the fused GEMM+AR build of the every-node row (2 x 8, 32768^2, k 2048, grouped), warm and
with the collector paused, as in the brief: one warm-up build, then ``N`` timed builds (default 3), each
printed. Run from a checkout's root with its own venv; alternate the checkouts (buildtime.sh)."""
import dataclasses
import sys
import time

from mkernel import builders, ir
from mkernel.scenario import load_scenario

sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
mk, c = builders.get("gemm_ar"), sc.cluster
with ir.paused_gc():
    mk.build(w, c, grouped=True)
times = []
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    t = time.process_time()
    with ir.paused_gc():
        fused = mk.build(w, c, grouped=True)
    times.append(time.process_time() - t)
print(" ".join(f"{x:.3f}" for x in times), "min", f"{min(times):.3f}", "tasks", len(fused.tasks))
