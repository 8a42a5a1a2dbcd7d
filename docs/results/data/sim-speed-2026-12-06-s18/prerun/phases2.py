"""Every-node row: process time of finer pre-run parts (inclusive, wrapped)."""
import time, sys, dataclasses, importlib
import mkernel.builders.gemm_ar as g, mkernel.ir as ir, mkernel.sim.engine as se
from mkernel import runner
from mkernel.scenario import load_scenario
acc = {}
def wrap(modname, name, label=None):
    obj = importlib.import_module(modname) if isinstance(modname, str) else modname
    if '.' in name:
        cls, name = name.split('.'); obj = getattr(obj, cls)
    f = getattr(obj, name); label = label or name
    def w(*a, **k):
        s = time.process_time(); r = f(*a, **k)
        acc[label] = acc.get(label, 0) + time.process_time() - s
        return r
    setattr(obj, name, w)
for m, n in [('mkernel.builders.gemm_ar', 'build'), ('mkernel.builders.gemm_ar', '_intra_queue'),
             ('mkernel.builders._gemm_ar_net', 'direct_exchange'), ('mkernel.builders.gemm_ar', '_drain'),
             ('mkernel.ir', 'Schedule.validate'), ('mkernel.members', 'region_table'), ('mkernel.signal_table', 'signal_table'),
             ('mkernel.screen', 'cleared'), ('mkernel.coverage', 'check_outputs'), ('mkernel.validation', 'Checker._check_cycles') if False else ('mkernel.sim.cellgrid', 'CellGrid.__init__'),
             ('mkernel.sim.engine', 'Model.__init__'), ('mkernel.sim.engine', 'Model.run'), ('mkernel.sim.hazardlog', 'LoggedTracker.finish'),
             ('mkernel.ir', 'Schedule.queues')]:
    try: wrap(m, n)
    except AttributeError as e: print('skip', m, n, e)
sc = load_scenario('scenarios/paper-ib-2x8.toml')
sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel='gemm_ar', m=32768, n=32768, k=2048))
s = time.process_time(); runner.run(sc, collapse=False); tot = time.process_time() - s
print(" ".join(f"{k} {v:.3f}" for k, v in acc.items()), f"| runner.run {tot:.3f}")
