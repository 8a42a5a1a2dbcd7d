"""CPU time of the hazard tracker's set-up (LoggedTracker.__init__) and of its finish() inside the every-node
row's tracked run (the 2 x 8 GEMM+AR 32768^2, `mkernel run ... --no-collapse`'s simulation), and of the whole
sim.run. Run with each checkout's venv from that checkout's root. Usage: python time_run.py [LABEL]"""
import dataclasses
import sys
import time

from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend, hazardlog

sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
mk, c = builders.get("gemm_ar"), sc.cluster
with ir.paused_gc():
    fused = mk.build(w, c, grouped=True)
took = {}
LT = hazardlog.LoggedTracker
init, finish = LT.__init__, LT.finish


def timed(name, f):
    def g(*a, **k):
        t = time.process_time()
        r = f(*a, **k)
        took[name] = took.get(name, 0.0) + time.process_time() - t
        return r
    return g


LT.__init__, LT.finish = timed("init", init), timed("finish", finish)
t = time.process_time()
st = SimBackend().run(fused, c, collapse=False)
run = time.process_time() - t
print(sys.argv[1] if len(sys.argv) > 1 else "", "init %.3f finish %.3f run %.3f events %d hazards %d" % (
    took["init"], took["finish"], run, st.events, len(st.hazards)))
