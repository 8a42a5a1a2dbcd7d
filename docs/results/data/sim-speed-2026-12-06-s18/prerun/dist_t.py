import dataclasses, time, gc, collections
from mkernel import builders, ir, members, validation as V
from mkernel.scenario import load_scenario
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
mk, c = builders.get("gemm_ar"), sc.cluster
with ir.paused_gc():
    fused = mk.build(w, c, grouped=True)
acc = collections.defaultdict(float); cnt = collections.Counter()
od, osr = members.distinct, members.shared_rows
def d(items):
    s = time.perf_counter(); r = od(items); acc["distinct"] += time.perf_counter() - s; cnt[len(items)] += 1; return r
def sr(*a):
    s = time.perf_counter(); r = osr(*a); acc["shared_rows"] += time.perf_counter() - s; return r
import mkernel.signal_table as ST
members.distinct = ST.distinct = d
members.shared_rows = ST.shared_rows = sr
gc.disable()
best = 1e9
for i in range(5):
    acc.clear(); cnt.clear()
    s = time.perf_counter(); V.validate(fused); t = time.perf_counter() - s
    if t < best: best, b = t, (dict(acc), dict(cnt))
print(best, b)
