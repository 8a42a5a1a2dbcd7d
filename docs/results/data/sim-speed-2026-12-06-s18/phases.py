import time, dataclasses, importlib
import mkernel.builders.gemm_ar as g, mkernel.ir as ir, mkernel.sim.engine as se
from mkernel import runner
from mkernel.scenario import load_scenario
log = []
def wrap(obj, name, label):
    f = getattr(obj, name)
    def w(*a, **k):
        s = time.process_time(); r = f(*a, **k); log.append((label, time.process_time() - s)); return r
    setattr(obj, name, w)
wrap(g, 'build', 'build'); wrap(g, 'build_baseline', 'build_baseline'); wrap(ir.Schedule, 'validate', 'validate'); wrap(se.Model, '__init__', 'init'); wrap(se.Model, 'run', 'run')
sc = load_scenario('scenarios/paper-ib-2x8.toml')
sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel='gemm_ar', m=32768, n=32768, k=2048))
s = time.process_time(); runner.run(sc, collapse=False); tot = time.process_time() - s
print(" ".join(f"{k} {v:.3f}" for k, v in log), f"| total {tot:.3f}")
