"""Counts behind the NVLink-path note: per transfer_plan call its legs, distinct links, count, whether its group was
already touched at that instant or is new; whether every leg is whole; per wake the heap and groups; per resolve
whether it pruned, its flows and links. usage: nvstats.py M (run from a checkout root, PYTHONHASHSEED=0)."""
import sys, dataclasses, collections
from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend
import mkernel.sim.flows as fl
sc = load_scenario("scenarios/paper-ib-2x8.toml")
size = int(sys.argv[1])
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=size, n=size, k=2048)
m, c, sim = builders.get("gemm_ar"), sc.cluster, SimBackend()
with ir.paused_gc():
    fused = m.build(w, c, grouped=True)
    table = fused.validate(races=True)
C = collections.Counter()
orig = fl.FlowNet.transfer_plan
def tp(self, plan, count=1, then=None):
    size, legs, unit, key = plan[:4]  # (base: four fields; this branch adds the counted flows)
    g = self.groups.get(id(key))
    C[('legs', len(legs), len(unit), count, g is not None and g in self.touched, g is None)] += 1
    C['ints'] += all(float(p).is_integer() and float(b).is_integer() for _, p, b in legs)
    return orig(self, plan, count, then)
fl.FlowNet.transfer_plan = tp
ow = fl.FlowNet._wake
def wk(self, at):
    C[('wake', len(self.heap), len(self.groups))] += 0
    C['wakes'] += 1
    C['heap'] += len(self.heap)
    C['groups'] += len(self.groups)
    return ow(self, at)
fl.FlowNet._wake = wk
import mkernel.sim.maxmin as mm
omm = fl.resolve
def rs(links, touched, prune):
    C[('prune', prune)] += 1
    fs, r = omm(links, touched, prune)
    C['mmflows'] += len(fs); C['links'] += len(links)
    return fs, r
fl.resolve = rs
st = sim.run(fused, c, collapse=False, regions=table)
for k, v in sorted(C.items(), key=lambda kv: -kv[1]): print(k, v)
