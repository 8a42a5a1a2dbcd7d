"""Issue 30's every-node row, the tracked fused run: in the order events are popped, how the lanes' model
timers (`_due`) of one step at one instant follow each other. A streak is a maximal run of consecutive
events with the same (time, kind): a batch over lanes is exact by order alone where a step's 16 lane events
form one streak. Prints, per kind, events, streaks and events per streak, and the commonest sequences of
kinds at one instant. Run from a checkout's root with its venv."""
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
seq = []  # (time, kind) per event, in pop order


def kind_of(env, event):
    if event.__class__ is not tuple:
        return "simpy-event"
    fn, arg = event
    name = getattr(fn, "__name__", "?")
    if name == "_due":
        r = MODEL[-1]._timers[arg][0]
        return f"{arg[1].__name__}:{r.task.role.value}/{r.task.op.value}"
    if name == "_resume" and getattr(fn, "__self__", None) is env:
        return "gen"
    return name


def run(self, until=None):
    if until is not None:
        return signals.simpy.Environment.run(self, until)
    queue = self._queue
    while queue:
        self.events += 1
        when, _, _, event = heappop(queue)
        self.now = self._now = when
        seq.append((when, kind_of(self, event)))
        if event.__class__ is tuple:
            event[0](event[1])
        else:
            self._process(event)
    self.events += 1


signals.CountingEnvironment.run = run
sim.run(fused, c, collapse=False, regions=table)
events, streaks = collections.Counter(), collections.Counter()
prev = None
for t, k in seq:
    events[k] += 1
    if (t, k) != prev:
        streaks[k] += 1
    prev = (t, k)
print(f"{'kind':36s} {'events':>8s} {'streaks':>8s} {'per streak':>10s}")
for k in sorted(events, key=lambda k: -events[k]):
    print(f"{k:36s} {events[k]:8d} {streaks[k]:8d} {events[k] / streaks[k]:10.2f}")
instants = collections.defaultdict(list)
for t, k in seq:
    if not instants[t] or instants[t][-1] != k:
        instants[t].append(k)
pattern = collections.Counter(" > ".join(v) for v in instants.values())
print("\nthe commonest sequences of streak kinds at one instant (instants: %d)" % len(instants))
for p, n in pattern.most_common(12):
    print(f"{n:6d}  {p}")
