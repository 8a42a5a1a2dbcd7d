"""The design's seven planted errors (docs/results/2026-12-05-array-dispatch-design.md, section 5), each put on the
array path only (Model(arrays=True)) by a monkeypatch, then tests/sim/test_array_path.py's comparison run on its
cases: CAUGHT where some case differs from the path that queues each lane's timer alone (arrays=False).

Errors 1 and 2 are in the code that exists (step 1's streak timers). Errors 3-7 are in code that steps 2-6 would
write (streak-wide bumps, takes, log chunks, flow emits), not written yet: each is emulated on today's code as the
reordering it would make within a streak, so the run shows whether the test sees that class of error.
usage (from the checkout root): python docs/results/data/array-dispatch-impl-2026-12-05/planted.py"""
import sys
from heapq import heappush

sys.path[:0] = ["tests", "tests/sim"]
import test_array_path as tap  # noqa: E402
from mkernel.sim import dispatch, engine, flows, signals  # noqa: E402
from simpy.core import NORMAL  # noqa: E402

Env, Model = signals.CountingEnvironment, engine.Model
ORIGINAL = {(Env, "_slots"): Env._slots, (Env, "call_in_streak"): Env.call_in_streak,
            (Model, "_signal"): Model._signal, (Model, "_block"): Model._block,
            (dispatch.Run, "bumps"): dispatch.Run.bumps}


def whole(self, streak, most):
    """1: a streak's slots all run at once, whatever event comes first (a put's generator started now)."""
    queue, when, fn, eids, args = self._queue, streak.when, streak.fn, streak.eids, streak.args
    i = streak.at
    while i < len(eids):
        streak.at = i + 1
        fn(args[i])
        i += 1
        if i < len(eids):
            self.events += 1
    del self._streaks[streak.key]


def one_eid(self, key, when, fn, arg):
    """2: one eid drawn per streak, its later slots reusing it."""
    streak = self._streaks.get(key)
    eid = streak.eids[0] if streak is not None else next(self._eid)
    if streak is None:
        streak = self._streaks[key] = signals.Streak(key, when, fn)
        heappush(self._queue, (when, NORMAL, eid, streak))
    streak.eids.append(eid)
    streak.args.append(arg)


SORTED = [False]  # (set while the array path's run bumps: error 3)


def key_order(self, run, paid):
    """3: a run's bumps made in key order, not the flat schedule's (so its releases come in key order)."""
    SORTED[0] = self.arrays
    try:
        ORIGINAL[(Model, "_signal")](self, run, paid)
    finally:
        SORTED[0] = False


def sorted_bumps(self):
    bumps = ORIGINAL[(dispatch.Run, "bumps")](self)
    return [(sorted(keys, key=repr), times, repeat) for keys, times, repeat in bumps] if SORTED[0] else bumps


def streak_wide(rearrange):
    """A streak's slots run one after the other as step 1 does, with ``rearrange(self, streak, run_slots)``
    deciding how their work is done (errors 4-6: work of the lanes of one streak reordered)."""
    def slots(self, streak, most):
        if streak.fn.__self__.arrays is not True or streak.key[0].__name__ not in rearrange.steps:
            return ORIGINAL[(Env, "_slots")](self, streak, most)
        n = len(streak.eids) - streak.at
        self.events += n - 1
        keys = streak.args[streak.at:]
        streak.at = len(streak.eids)
        del self._streaks[streak.key]
        rearrange(streak.fn.__self__, keys)
    return slots


def bumps_first(model, keys):
    """4: every lane's bumps of a ``_paid`` streak made before any lane's takes."""
    batches = [model._timers.pop(key) for key in keys]
    for runs in batches:
        for run in runs:
            model._signal(run, run.paid)
    for runs in batches:
        model._free(runs)


bumps_first.steps = ("_paid",)


def by_rank_reversed(model, keys):
    """5: a streak's log rows appended lane group by lane group in another order than the lanes' (last lane first)."""
    log = model.tracker._log
    at = len(log)
    for key in keys:
        key[1](model._timers.pop(key))
    log[at:] = sorted(log[at:], key=lambda row: -row[0].rank)


by_rank_reversed.steps = ("_worked", "_copied", "_free", "_paid", "_resume")


def group_order(model, keys):
    """6: a streak's flow transfers made after its lanes' steps, in group order (by the group's key)."""
    made = []
    net = model.flows
    net.transfer_plan = lambda plan, count=1, then=None: made.append((plan, count, then))
    try:
        for key in keys:
            key[1](model._timers.pop(key))
    finally:
        del net.transfer_plan
    for plan, count, then in sorted(made, key=lambda m: repr(m[0][3])):
        net.transfer_plan(plan, count, then)


group_order.steps = ("_free", "_paid", "_resume")


def late_register(self, run):
    """7: a run whose key was bumped since it was taken registers as a waiter anyway (it must resume at once)."""
    if not self.arrays or self.board.values.get(run.key, 0) < run.need:
        return ORIGINAL[(Model, "_block")](self, run)
    self.board.waiters[run.key].append((run.need, run))
    run.lane.pool.blocked[run.role] += run.n
    self.blocked[id(run)] = run


PLANTED = {
    "1 a streak run whole, ignoring an URGENT head": [(Env, "_slots", whole)],
    "2 one eid per streak instead of per slot": [(Env, "call_in_streak", one_eid)],
    "3 releases in key order instead of position order": [(Model, "_signal", key_order), (dispatch.Run, "bumps", sorted_bumps)],
    "4 one lane's takes reading a later lane's bumps": [(Env, "_slots", streak_wide(bumps_first))],
    "5 log rows appended by another order than the lanes'": [(Env, "_slots", streak_wide(by_rank_reversed))],
    "6 the flow transfers of a streak made in group order": [(Env, "_slots", streak_wide(group_order))],
    "7 a blocked row registered after its key was bumped": [(Model, "_block", late_register)],
}


def caught() -> str:
    """The cases that differ, and where (the first of each), of all test_array_path's cases."""
    hits, total = [], 0
    for name, s, c in tap._cases():
        total += 1
        on, off = tap.run(s, c, True), tap.run(s, c, False)
        if on != off:
            hits.append(f"{name} ({'deadlock' if len(on) == 2 or len(off) == 2 else next(p for p, a, b in zip(('log', 'hazards', 'finish', 'links', 'events'), on, off) if a != b)})")
    if not hits:
        return f"MISSED (no difference in {total} cases)"
    return f"CAUGHT by {len(hits)} of {total} cases, first {', '.join(hits[:3])}"


for what, patches in PLANTED.items():
    for cls, attr, fn in patches:
        setattr(cls, attr, fn)
    try:
        verdict = caught()
    except Exception as exc:  # (an error the planted code raised: it is caught too)
        verdict = f"CAUGHT (raised {type(exc).__name__}: {str(exc)[:80]})"
    finally:
        for cls, attr, _ in patches:
            setattr(cls, attr, ORIGINAL[(cls, attr)])
    print(f"{what}: {verdict}", flush=True)
print("nothing planted (must be no difference):", caught())
