"""Handler time per model step (the _due slots by their step), the every-node row's tracked fused run."""
import dataclasses, time, collections
import mkernel.sim.dispatch as D, mkernel.sim.engine as se
from mkernel import runner
from mkernel.scenario import load_scenario
T, N, R = collections.Counter(), collections.Counter(), collections.Counter()
pc = time.perf_counter_ns
def _due(self, key):
    runs = self._timers.pop(key); k = key[1].__name__
    t = pc(); key[1](runs); T[k] += pc() - t; N[k] += 1; R[k] += len(runs)
D.Dispatch._due = _due
_wake0 = D.Dispatch._wake
def _wake(self, lane):
    n = len(lane.released); t = pc(); _wake0(self, lane); T['wake'] += pc() - t; N['wake'] += 1; R['wake'] += n
D.Dispatch._wake = _wake
sc = load_scenario('scenarios/paper-ib-2x8.toml')
sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel='gemm_ar', m=32768, n=32768, k=2048))
n = [0]; _r = se.Model.run
def w(self, *a, **k):
    n[0] += 1; t = time.process_time(); r = _r(self, *a, **k)
    if n[0] == 1:
        print(f"run {time.process_time() - t:.2f} s CPU, events {self.env.events}")
        for k, v in T.most_common(): print(f"{k:12s} {v/1e6:8.1f} ms  slots {N[k]:7d} runs {R[k]:7d}  {v/1e3/N[k]:.1f} us/slot")
    return r
se.Model.run = w
runner.run(sc, collapse=False)
