"""Issue 30's every-node row (2 x 8 GEMM+AR 32768^2 k2048, --no-collapse): the tracked fused run, alone, as
the runner calls it, counted per role and op (runs started, members, entries, blocks, releases, timers by
step, flows, network sends), then profiled under cProfile. Run from a checkout's root with its venv.
`python roles.py counts` prints the counters (no profiler); `python roles.py profile OUT.pstats` profiles."""
import collections
import dataclasses
import sys
import time

from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend
from mkernel.sim import engine, dispatch, flows, signals

sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
m, c, sim = builders.get("gemm_ar"), sc.cluster, SimBackend()
with ir.paused_gc():
    fused = m.build(w, c, grouped=True)
    table = fused.validate(races=True)

mode = sys.argv[1] if len(sys.argv) > 1 else "counts"
C = collections.Counter()


def kind(task):
    peer = any(r[0] for r in task.step.regions) if task.count > 1 else any(
        r.rank != task.rank for r in task.reads + task.writes)
    return f"{task.role.value}/{task.op.value}{'/peer' if peer else ''}"


if mode == "counts":
    entries = collections.Counter()
    members = collections.Counter()
    for t in fused.tasks:
        entries[kind(t)] += 1
        members[kind(t)] += t.count
    for k in sorted(entries):
        print(f"schedule {k:30s} entries {entries[k]:8d} members {members[k]:8d}")
    work, block, released, later = engine.Model._work, dispatch.Dispatch._block, dispatch.Dispatch._released, \
        engine.Model._later

    def _work(self, run):
        k = kind(run.task)
        C["runs " + k] += 1
        C["members " + k] += run.n
        C["entries-in-runs " + k] += len(run.entries())
        return work(self, run)

    def _block(self, run):
        C["blocks " + kind(run.task)] += 1
        return block(self, run)

    def _released(self, run):
        C["releases " + kind(run.task)] += 1
        return released(self, run)

    def _later(self, delay, then, run):
        C[f"later {then.__name__} " + kind(run.task)] += 1
        return later(self, delay, then, run)

    engine.Model._work, dispatch.Dispatch._block, dispatch.Dispatch._released, engine.Model._later = \
        _work, _block, _released, _later
    call_later = signals.CountingEnvironment.call_later

    def cl(self, delay, fn, *a):
        C["env.call_later " + getattr(fn, "__name__", "?")] += 1
        return call_later(self, delay, fn, *a)
    signals.CountingEnvironment.call_later = cl
    tp = flows.FlowNet.transfer_plan

    def transfer_plan(self, *a, **k):
        C["flows.transfer_plan"] += 1
        return tp(self, *a, **k)
    flows.FlowNet.transfer_plan = transfer_plan
    t = time.process_time()
    st = sim.run(fused, c, collapse=False, regions=table)
    print("run cpu (instrumented) %.2f s, events %d, time_us %r" % (time.process_time() - t, st.events, st.time_s * 1e6))
    for k in sorted(C):
        print(f"{k:60s} {C[k]:9d}")
else:
    import cProfile
    pr = cProfile.Profile()
    t = time.process_time()
    pr.enable()
    st = sim.run(fused, c, collapse=False, regions=table)
    pr.disable()
    print("run cpu (profiled) %.2f s, events %d" % (time.process_time() - t, st.events))
    pr.dump_stats(sys.argv[2])
