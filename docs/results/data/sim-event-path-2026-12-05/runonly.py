import dataclasses, pickle, sys
from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
m, c, sim = builders.get("gemm_ar"), sc.cluster, SimBackend()
with ir.paused_gc():
    fused = m.build(w, c, grouped=True)
for i in range(int(sys.argv[1])):
    sim.run(fused, c, collapse=False)
