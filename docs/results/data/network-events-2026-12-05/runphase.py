"""The every-node 2 x 8 GEMM+AR 32768^2 k2048 row's tracked fused run, alone (CPU s): sim.run as the runner calls
it (collapse off, validate()'s region table handed on), with the hazard tracker's set-up (its grids, another
helper's area) timed apart. Prints the simulated time, the event count and the run phase with and without
the grids. Run from a checkout's root (main: PYTHONPATH at a `git archive`, see measure.sh)."""
import dataclasses
import time

import mkernel
from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend, hazards

grids = [0.0]
init = hazards.ArrivalTracker.__init__


def timed_init(self, s, *a):
    t = time.process_time()
    init(self, s, *a)
    grids[0] += time.process_time() - t


hazards.ArrivalTracker.__init__ = timed_init
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
m, c, sim = builders.get("gemm_ar"), sc.cluster, SimBackend()
with ir.paused_gc():
    fused = m.build(w, c, grouped=True)
    table = fused.validate(races=True)
t = time.process_time()
st = sim.run(fused, c, collapse=False, regions=table)
run = time.process_time() - t
print(mkernel.__file__, repr(st.time_s * 1e6), st.events, "run %.2f grids %.2f run-without-grids %.2f" % (run, grids[0], run - grids[0]))
