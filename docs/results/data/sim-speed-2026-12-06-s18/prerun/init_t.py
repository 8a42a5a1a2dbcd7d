import sys, dataclasses, gc, time
sys.path.insert(0, "/tmp/s18")
from lprof import LP
from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import engine, hazards
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
mk, c = builders.get("gemm_ar"), sc.cluster
with ir.paused_gc():
    fused = mk.build(w, c, grouped=True)
tab = fused.validate()
gc.disable()
for i in range(3):
    a = time.process_time(); m = engine.Model(fused, c, None, regions=tab); print("Model init", time.process_time() - a)
with LP(engine.Model.__init__, hazards.ArrivalTracker.__init__) as lp:
    engine.Model(fused, c, None, regions=tab)
lp.report(15)
