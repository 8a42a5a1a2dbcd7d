"""Runs made and runs worked in the every-node row's tracked fused run, by (op, role): how many runs members
that block alone open, and how many runs they are worked in once released. usage: python runs_by_kind.py 32768"""
import dataclasses, collections, sys
from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend
from mkernel.sim import runs as R, engine as E
sc = load_scenario("scenarios/paper-ib-2x8.toml")
size = int(sys.argv[1])
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=size, n=size, k=2048)
m, c, sim = builders.get("gemm_ar"), sc.cluster, SimBackend()
made = collections.Counter(); blocked = collections.Counter(); worked = collections.Counter(); members = collections.Counter()
init = R.Run.__init__
def counted(self, lane, role, task, first, slot, wait, key, need, speed):
    init(self, lane, role, task, first, slot, wait, key, need, speed)
    made[(task.op.value, role.value, task.count > 1)] += 1
R.Run.__init__ = counted
work = E.Model._work
def w2(self, run):
    worked[(run.task.op.value, run.role.value, self._joins(run.task))] += 1
    members[(run.task.op.value, run.role.value, self._joins(run.task))] += run.n
    return work(self, run)
E.Model._work = w2
with ir.paused_gc():
    fused = m.build(w, c, grouped=True)
    table = fused.validate(races=True)
    st = sim.run(fused, c, collapse=False, regions=table)
print("events", st.events, "fused us", st.time_s * 1e6)
print("runs made by (op, role, group):")
for k, v in made.most_common(): print(f"  {v:8d} {k}")
print("runs worked by (op, role, may share a run): runs, members")
for k, v in worked.most_common(): print(f"  {v:8d} {members[k]:8d} {k}")
