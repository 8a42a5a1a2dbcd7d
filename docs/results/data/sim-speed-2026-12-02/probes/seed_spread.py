"""The spread of SRD-jittered fused times over seeds 0-9 (jitter-free beside), current code."""
import statistics
from mkernel.runner import run
from mkernel.studies.sweep import Point, scenario_of
import mkernel.sim.engine as e
print("code:", e.__file__)
for tb, size, k in (("scaleout/efa-400g-rail-4x8", 8192, 512), ("paper-efa-2x8", 8192, 512)):
    for prof in ("measured", "reference"):
        sc = scenario_of(Point(tb, "gemm_ar", size, (("m", size), ("n", size), ("k", k)), (("kernels", prof),)))
        ts = [run(sc, backend="sim", collapse=True, seed=s)[0]["time_s"] * 1e6 for s in range(10)]
        print(tb, prof, "seeds 0-9: min %.1f median %.1f max %.1f stdev %.1f (%.1f%%)" % (
            min(ts), statistics.median(ts), max(ts), statistics.stdev(ts), 100 * statistics.stdev(ts) / statistics.mean(ts)),
            "seed 0 %.1f" % ts[0], flush=True)
