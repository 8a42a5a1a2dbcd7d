# run_bumps replayed per kind of entry (op, paid) on the calls of a run at 16384: us a call (a micro-benchmark on the tree at hand)
import dataclasses, sys, collections, time
from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend
import mkernel.sim.signals as sg, mkernel.sim.engine as se
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=16384, n=16384, k=2048)
m, c, sim = builders.get("gemm_ar"), sc.cluster, SimBackend()
with ir.paused_gc():
    fused = m.build(w, c, grouped=True); table = fused.validate(races=True)
calls = []
o = se.run_bumps
def rb(entries, rank, paid):
    calls.append(([tuple(e) for e in entries], rank, paid)); return o(entries, rank, paid)
se.run_bumps = rb
st = sim.run(fused, c, collapse=False, regions=table)
kinds = collections.defaultdict(list)
for a in calls: kinds[(a[0][0][0].op.value, a[2])].append(a)
for k, v in kinds.items():
    best = 1e9
    for _ in range(5):
        t = time.perf_counter()
        for a in v: o(*a)
        best = min(best, time.perf_counter() - t)
    print(k, len(v), round(best / len(v) * 1e6, 2), 'us/call', round(best * 1e3, 1), 'ms')
