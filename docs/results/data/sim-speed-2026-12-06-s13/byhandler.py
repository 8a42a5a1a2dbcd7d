"""Handler time of the every-node row's tracked fused run, by the function each event calls (perf_counter_ns)."""
import dataclasses, time, collections
from heapq import heappop
import mkernel.sim.signals as S, mkernel.sim.engine as se
from mkernel import runner
from mkernel.scenario import load_scenario
T, N, M = collections.Counter(), collections.Counter(), collections.Counter()
def name(f):
    f = getattr(f, 'func', f)
    return getattr(f, '__qualname__', repr(f))
def run(self, until=None):
    queue = self._queue; pc = time.perf_counter_ns
    while queue:
        self.events += 1
        when, _, _, event = heappop(queue)
        self.now = self._now = when
        t = pc()
        if event.__class__ is tuple:
            k = name(event[0]); event[0](event[1])
        elif event.__class__ is S.Streak:
            k = 'streak ' + name(event.fn); e0 = self.events; self._slots(event, -1); M[k] += self.events - e0 + 1
        else:
            k = 'simpy ' + type(event).__name__; self._process(event)
        T[k] += pc() - t; N[k] += 1
    self.events += 1
S.CountingEnvironment.run = run
sc = load_scenario('scenarios/paper-ib-2x8.toml')
sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel='gemm_ar', m=32768, n=32768, k=2048))
n = [0]; _r = se.Model.run
def w(self, *a, **k):
    n[0] += 1; t = time.process_time(); r = _r(self, *a, **k)
    if n[0] == 1:
        tot = sum(T.values())
        print(f"run {time.process_time() - t:.2f} s CPU, handlers {tot/1e9:.2f} s, events {self.env.events}")
        for k, v in T.most_common(30): print(f"{k:45s} {v/1e6:8.1f} ms {100*v/tot:5.1f}%  pops {N[k]:7d} slots {M[k] or N[k]:7d}")
    return r
se.Model.run = w
runner.run(sc, collapse=False)
