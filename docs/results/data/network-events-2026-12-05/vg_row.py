"""Build the 2 x 8 GEMM+AR (m=n=SIZE, k=SIZE/16) fused schedule; with 'run', simulate it every node, tracked."""
import dataclasses, sys
from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend
size = int(sys.argv[1])
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=size, n=size, k=size // 16)
m, c = builders.get("gemm_ar"), sc.cluster
with ir.paused_gc():
    s = m.build(w, c, grouped=True)
if sys.argv[2] == "run":
    st = SimBackend().run(s, c, collapse=False)
    print(repr(st.time_s * 1e6), st.events)
