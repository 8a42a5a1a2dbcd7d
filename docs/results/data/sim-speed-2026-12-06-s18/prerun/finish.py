import sys, dataclasses, gc
sys.path.insert(0, "/tmp/s18")
from lprof import LP
from mkernel import runner
from mkernel.scenario import load_scenario
from mkernel.sim import hazardlog as H
sc = load_scenario('scenarios/paper-ib-2x8.toml')
sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel='gemm_ar', m=32768, n=32768, k=2048))
orig = H.LoggedTracker.finish
lp = LP(orig, H.LoggedTracker._entries, H.LoggedTracker._rows, H.LoggedTracker._short, H.LoggedTracker._cells, H._Landings.__init__, H._Landings.fewer)
def fin(self):
    with lp: orig(self)
H.LoggedTracker.finish = fin
runner.run(sc, collapse=False)
lp.report(40)
