# the row's own tracker construction (first and only, inside the run, as profinit.py): process time, minor faults, system time
import dataclasses, time, resource, sys
from mkernel.scenario import load_scenario
from mkernel import runner
import mkernel.sim.hazardlog as hl
import mkernel.sim.backend as sb
cap = {}
orig = hl.LoggedTracker.__init__
def init(self, *a, **k):
    r0 = resource.getrusage(resource.RUSAGE_SELF); t = time.process_time()
    orig(self, *a, **k)
    t = time.process_time() - t; r1 = resource.getrusage(resource.RUSAGE_SELF)
    cap.setdefault('r', (t, r1.ru_minflt - r0.ru_minflt, r1.ru_stime - r0.ru_stime, r1.ru_maxrss - r0.ru_maxrss))
hl.LoggedTracker.__init__ = init
sc = load_scenario('scenarios/paper-ib-2x8.toml')
sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel='gemm_ar', m=32768, n=32768, k=2048))
M = sb.Model
class Stop(Exception): pass
def mk(*a, **k):
    M(*a, **k); raise Stop
sb.Model = mk
try: runner.run(sc, collapse=False)
except Stop: pass
t, flt, st, rss = cap['r']
print(f"{sys.argv[1] if len(sys.argv) > 1 else ''} init {t:.4f} minflt {flt} sys {st:.4f} maxrss+ {rss/1e3:.1f} MB")
