import dataclasses, tracemalloc, gc
from mkernel.scenario import load_scenario
from mkernel import runner
import mkernel.ir as ir
cap = {}
orig = ir.Schedule.validate
def v(self, *a, **k):
    cap.setdefault('s', self); return orig(self, *a, **k)
ir.Schedule.validate = v
sc = load_scenario('scenarios/paper-ib-2x8.toml')
sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel='gemm_ar', m=32768, n=32768, k=2048))
import mkernel.sim.backend as sb
class Stop(Exception): pass
def boom(*a, **k): raise Stop
sb.Model = boom
try: runner.run(sc, collapse=False)
except Stop: pass
s = cap['s']
tracemalloc.start()
t = orig(s)
cur, peak = tracemalloc.get_traced_memory()
print("after validate: current MB", cur/2**20, "peak MB", peak/2**20)
recs, fields, codes = t
print("table MB", (recs.nbytes + sum(a.nbytes for a in fields.values()))/2**20, recs.shape, recs.dtype, {k: (a.dtype, a.shape) for k,a in fields.items()})
snap = tracemalloc.take_snapshot()
for st in snap.statistics('lineno')[:8]: print(st)
import mkernel.validation as V, time
names = ['region_table','signal_table','cleared','check_outputs','_check_cycles','_check_signals','_placed','_homes', 'Entries']
for nm in names:
    f = getattr(V, nm)
    def w(*a, _f=f, _nm=nm, **k):
        c0,_ = tracemalloc.get_traced_memory(); tracemalloc.reset_peak(); t=time.process_time()
        r = _f(*a, **k); c1,p = tracemalloc.get_traced_memory()
        print(f"{_nm:15s} peak+{(p-c0)/2**20:7.1f} MB  kept {(c1-c0)/2**20:6.1f} MB  {time.process_time()-t:.3f}s")
        return r
    setattr(V, nm, w)
tracemalloc.stop(); tracemalloc.start()
orig(s)
