"""Pickle the row's fused region table and its tracked run's hazard log (tasks as their positions) + ends."""
import dataclasses, pickle, sys
from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend, hazardlog as H
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
mk, c = builders.get("gemm_ar"), sc.cluster
with ir.paused_gc():
    fused = mk.build(w, c, grouped=True)
    table = fused.validate(races=True)
orig = H.LoggedTracker.finish
def fin(self):
    if self.schedule is fused:
        log = list(self._log)
        for j in range(0, len(log), 4):
            assert fused.tasks[log[j].id] is log[j]
            log[j] = log[j].id
        with open(sys.argv[1], "wb") as f:
            pickle.dump((table, log, self._ends), f, protocol=5)
    orig(self)
H.LoggedTracker.finish = fin
SimBackend().run(fused, c, collapse=False, regions=table)
