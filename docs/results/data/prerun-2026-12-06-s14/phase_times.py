"""time (process_time) each pre-run phase of the every-node row; optional cProfile of one phase."""
import sys, time, dataclasses, cProfile, pstats
import mkernel.builders.gemm_ar as g, mkernel.ir as ir
from mkernel.scenario import load_scenario
from mkernel.sim.hazardlog import LoggedTracker
sc = load_scenario('scenarios/paper-ib-2x8.toml')
w = dataclasses.replace(sc.workload, kernel='gemm_ar', m=32768, n=32768, k=2048)
c = sc.cluster
prof = sys.argv[1] if len(sys.argv) > 1 else ''
def ph(name, f):
    if prof == name:
        p = cProfile.Profile(); p.enable(); r = f(); p.disable()
        pstats.Stats(p).sort_stats(sys.argv[2] if len(sys.argv) > 2 else "tottime").print_stats(30)
        return r
    t = time.process_time(); r = f(); print(name, round(time.process_time() - t, 3)); return r
s = ph('build', lambda: g.build(w, c, grouped=True))
b = ph('bbuild', lambda: g.build_baseline(w, c, grouped=True, library_tasks=False))
tab = ph('validate', lambda: s.validate(races=True))
btab = ph('bvalidate', lambda: b.validate(races=True))
tr = ph('init', lambda: LoggedTracker(s, tab))
print(len(s.tasks), len(b.tasks))
