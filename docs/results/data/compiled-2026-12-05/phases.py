import sys, time, collections
import mkernel.builders.gemm_ar as g, mkernel.ir as ir, mkernel.sim.engine as se, mkernel.sim.hazardlog as hl
from mkernel import runner
from mkernel.scenario import load_scenario
T = collections.defaultdict(float)
def wrap(obj, name, label):
    f = getattr(obj, name)
    def w(*a, **k):
        t = time.process_time(); r = f(*a, **k); T[label] += time.process_time() - t; return r
    setattr(obj, name, w)
wrap(g, 'build', 'build fused'); wrap(g, 'build_baseline', 'build baseline')
wrap(ir.Schedule, 'validate', 'validate'); wrap(se.Model, '__init__', 'engine init'); wrap(se.Model, 'run', 'engine run')
for n in dir(hl):
    o = getattr(hl, n)
    if isinstance(o, type) and '__init__' in o.__dict__ and o.__module__ == hl.__name__: wrap(o, '__init__', 'hazard init ' + n)
import dataclasses
sc = load_scenario('scenarios/paper-ib-2x8.toml')
sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel='gemm_ar', m=32768, n=32768, k=2048))
haz = sys.argv[1] == 'on'
t = time.process_time()
runner.run(sc, collapse=False, hazards=None if haz else False)
T['total'] = time.process_time() - t
print(sys.argv[1], {k: round(v, 2) for k, v in T.items()})
