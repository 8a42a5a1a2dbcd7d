"""cProfile of the tracked every-node run of the 2x8 GEMM+AR (m=n=SIZE, k=SIZE/16): the build is outside the
profile. usage: prof.py SIZE OUT.prof (then pstats for call counts; the profiler inflates times ~2x)"""
import cProfile, dataclasses, sys
from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend

size = int(sys.argv[1])
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=size, n=size, k=size // 16)
mk, c = builders.get("gemm_ar"), sc.cluster
with ir.paused_gc():
    s = mk.build(w, c, grouped=True)
sim = SimBackend()
pr = cProfile.Profile()
pr.enable()
st = sim.run(s, c, collapse=False)
pr.disable()
pr.dump_stats(sys.argv[2])
print(repr(st.time_s * 1e6), st.events)
