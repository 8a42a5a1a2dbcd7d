"""The every-node row's tracked fused run (as the runner calls it), counting what the streak timers do: streaks queued,
the times the loop took one up (more than the streaks: some were split by an earlier event, e.g. a put's generator
started by a lane's step), slots run (lane timers, each one event), and slots per streak. usage: streakcount.py [M]"""
import collections
import dataclasses
import sys

from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend, signals

size = int(sys.argv[1]) if len(sys.argv) > 1 else 32768
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=size, n=size, k=2048)
m, c, sim = builders.get("gemm_ar"), sc.cluster, SimBackend()
with ir.paused_gc():
    fused = m.build(w, c, grouped=True)
    table = fused.validate(races=True)
made, taken, slots, splits = [], [0], collections.Counter(), collections.Counter()
make, take = signals.Streak.__init__, signals.CountingEnvironment._slots


def counted_make(self, *a):
    made.append(self)
    make(self, *a)


def counted_take(self, streak, most):
    taken[0] += 1
    take(self, streak, most)
    if streak.at < len(streak.eids):  # pushed back: the next event came before its next slot
        splits[streak.key[0].__name__] += 1


signals.Streak.__init__, signals.CountingEnvironment._slots = counted_make, counted_take
st = sim.run(fused, c, collapse=False, regions=table)
for s in made:
    slots[(s.key[0].__name__, len(s.eids))] += 1
print(f"simulated {st.time_s * 1e6!r} us, events {st.events}")
print(f"streaks queued {len(made)}, taken up {taken[0]} (split {taken[0] - len(made)} times), "
      f"slots {sum(len(s.eids) for s in made)}")
print("splits by step:", dict(splits))
print("step, slots a streak: streaks")
for (step, n), k in sorted(slots.items()):
    print(f"  {step} {n}: {k}")
