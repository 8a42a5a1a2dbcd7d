"""Issue 30's every-node row, the tracked fused run: each event's handler timed (perf_counter_ns around the
call, in a copy of CountingEnvironment.run's loop) and charged to what the event is: a model timer (`_due`)
by its step and the role/op of its first run; a flow wake or flush; a generator step (network: puts, proxy,
messages); a SimPy event (network). Work a handler does for other roles (a GEMM run's bumps releasing
waiters, its SMs taking the next members) is charged to the handler's role. Prints events and ms per class.
Run from a checkout's root with its venv."""
import collections
import dataclasses
import time
from heapq import heappop

from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend
from mkernel.sim import signals

sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
m, c, sim = builders.get("gemm_ar"), sc.cluster, SimBackend()
with ir.paused_gc():
    fused = m.build(w, c, grouped=True)
    table = fused.validate(races=True)
N = collections.Counter()
R = collections.Counter()  # runs handled, for model timers
M = collections.Counter()  # their members
T = collections.Counter()
MODEL = []
init = signals.SignalBoard.__init__


def board_init(self, env, epoch, release, home=None):
    MODEL.append(release.__self__)  # the model (release is its bound _released)
    init(self, env, epoch, release, home)


signals.SignalBoard.__init__ = board_init


def what(env, event):
    if event.__class__ is not tuple:
        return "simpy event (network: puts, proxy, NIC)"
    fn, arg = event
    name = getattr(fn, "__name__", "?")
    if name == "_due":
        runs = MODEL[-1]._timers.get(arg)
        roles = "+".join(sorted({f"{r.task.role.value}/{r.task.op.value}" for r in runs}))
        k = f"_due {arg[1].__name__} {roles}"
        R[k] += len(runs)
        M[k] += sum(r.n for r in runs)
        return k
    if name == "_resume" and fn.__self__ is env:
        return "generator step (network: puts, proxy, messages)"
    if name == "moved":
        return "flow end of a run (nvlink moved)"
    return name


def run(self, until=None):
    if until is not None:
        return signals.simpy.Environment.run(self, until)
    queue = self._queue
    clock = time.perf_counter_ns
    while queue:
        self.events += 1
        when, _, _, event = heappop(queue)
        self.now = self._now = when
        k = what(self, event)
        t0 = clock()
        if event.__class__ is tuple:
            event[0](event[1])
        else:
            self._process(event)
        T[k] += clock() - t0
        N[k] += 1
    self.events += 1


signals.CountingEnvironment.run = run
t = time.process_time()
st = sim.run(fused, c, collapse=False, regions=table)
cpu = time.process_time() - t
print("run cpu (timed loop) %.2f s, events %d, time_us %r" % (cpu, st.events, st.time_s * 1e6))
tot = sum(T.values())
for k, v in sorted(T.items(), key=lambda kv: -kv[1]):
    print(f"{k:55s} events {N[k]:8d}  ms {v / 1e6:8.1f}  us/event {v / 1e3 / N[k]:6.2f}  share {v / tot:6.1%}  runs {R[k]:7d}  members {M[k]:7d}")
print(f"{'all handlers':55s} events {sum(N.values()):8d}  ms {tot / 1e6:8.1f}")
