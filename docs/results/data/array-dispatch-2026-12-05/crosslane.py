"""Issue 30's every-node row, the tracked fused run: within each streak (consecutive lane events of one model
step at one instant), does a lane read a signal (a take's or a resume's wait check) that a later lane of the
same streak bumps? That is the design's rule 3c-4: where it never happens, a streak's bumps may be applied
before its takes in one pass. Also counts bumps that release a waiter of another lane, and waits registered on
a key that already has a waiter (the multi-waiter fallback). Run from a checkout's root with its venv."""
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
state = {"bumping": False, "reads": None, "bumps": None, "lane": None}
C = collections.Counter()


class Reads(dict):
    def get(self, key, default=None):
        if not state["bumping"] and state["reads"] is not None:
            state["reads"].add(key)
        return dict.get(self, key, default)


init = signals.SignalBoard.__init__


def board_init(self, env, epoch, release, home=None):
    MODEL.append(release.__self__)
    init(self, env, epoch, release, home)
    self.values = Reads()


bump = signals.SignalBoard.bump_keys


def bump_keys(self, keys, times=1, repeat=1):
    if state["bumps"] is not None:
        state["bumps"].update(keys)
    state["bumping"] = True
    try:
        bump(self, keys, times, repeat)
    finally:
        state["bumping"] = False


wait = signals.SignalBoard.wait_key


def wait_key(self, key, need, waiter):
    if self.waiters.get(key):
        C["waits on a key that already has a waiter"] += 1
    C["waits registered or checked"] += 1
    return wait(self, key, need, waiter)


signals.SignalBoard.__init__, signals.SignalBoard.bump_keys, signals.SignalBoard.wait_key = \
    board_init, bump_keys, wait_key
streak = []  # [(lane rank, reads, bumps)] of the current streak
current = [None]


def close():
    for j, (lane, reads, _) in enumerate(streak):
        later = set().union(*(b for _, _, b in streak[j + 1:])) if j + 1 < len(streak) else set()
        if reads & later:
            C["lane events reading a key a later lane of its streak bumps"] += 1
            C["such keys"] += len(reads & later)
    if streak:
        C["streaks"] += 1
        C["lane events in streaks"] += len(streak)
    streak.clear()


def run(self, until=None):
    if until is not None:
        return signals.simpy.Environment.run(self, until)
    queue = self._queue
    while queue:
        self.events += 1
        when, _, _, event = heappop(queue)
        self.now = self._now = when
        key = None
        if event.__class__ is tuple and getattr(event[0], "__name__", "") == "_due":
            key = (when, event[1][1].__name__)
        if key != current[0]:
            close()
            current[0] = key
        if key is not None:
            reads, bumps = set(), set()
            state["reads"], state["bumps"] = reads, bumps
            streak.append((event[1][0], reads, bumps))
        else:
            state["reads"] = state["bumps"] = None
        if event.__class__ is tuple:
            event[0](event[1])
        else:
            self._process(event)
    close()
    self.events += 1


signals.CountingEnvironment.run = run
from mkernel.sim import dispatch  # noqa: E402
released = dispatch.Dispatch._released


def _released(self, r):
    if streak and current[0] is not None and state["bumps"] is not None:
        C["releases from a model step" + (" of another lane" if id(r.lane) != streak[-1][0] else " of its own lane")] += 1
    return released(self, r)


dispatch.Dispatch._released = _released
for k in ("lane events reading a key a later lane of its streak bumps", "such keys",
          "waits on a key that already has a waiter", "releases from a model step of another lane"):
    C[k] += 0
st = sim.run(fused, c, collapse=False, regions=table)
print("events %d, time_us %r" % (st.events, st.time_s * 1e6))
for k in sorted(C):
    print(f"{k:62s} {C[k]:9d}")
