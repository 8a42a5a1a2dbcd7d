"""Issue 30's every-node row, the tracked fused run: how many distinct instants the model's timers (`_due`)
fire at, and how many lanes (ranks) share each (instant, step): the batch an array dispatcher would see per
event (one lane) or per instant (every lane). Also the same for every event of the run. Run from a
checkout's root with its venv."""
import collections
import dataclasses
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
MODEL = []
init = signals.SignalBoard.__init__


def board_init(self, env, epoch, release, home=None):
    MODEL.append(release.__self__)
    init(self, env, epoch, release, home)


signals.SignalBoard.__init__ = board_init
lanes = collections.defaultdict(set)  # (time, step, role) -> ranks
members = collections.Counter()
times = collections.Counter()  # every event's time


def run(self, until=None):
    if until is not None:
        return signals.simpy.Environment.run(self, until)
    queue = self._queue
    while queue:
        self.events += 1
        when, _, _, event = heappop(queue)
        self.now = self._now = when
        times[when] += 1
        if event.__class__ is tuple:
            if getattr(event[0], "__name__", "") == "_due":
                runs = MODEL[-1]._timers[event[1]]
                r = runs[0]
                k = (when, event[1][1].__name__, f"{r.task.role.value}/{r.task.op.value}")
                lanes[k].add(r.lane.rank)
                members[k] += sum(x.n for x in runs)
            event[0](event[1])
        else:
            self._process(event)
    self.events += 1


signals.CountingEnvironment.run = run
st = sim.run(fused, c, collapse=False, regions=table)
print("events %d, distinct event times %d, events per distinct time: mean %.1f" % (
    st.events, len(times), sum(times.values()) / len(times)))
by = collections.defaultdict(list)
for (t, step, role), ranks in lanes.items():
    by[(step, role)].append((len(ranks), members[(t, step, role)]))
print(f"{'step role':40s} {'instants':>8s} {'_due events':>11s} {'lanes/instant':>13s} {'members/instant':>15s}")
for (step, role), xs in sorted(by.items()):
    n = len(xs)
    print(f"{step + ' ' + role:40s} {n:8d} {sum(a for a, _ in xs):11d} {sum(a for a, _ in xs) / n:13.2f} "
          f"{sum(b for _, b in xs) / n:15.1f}")
