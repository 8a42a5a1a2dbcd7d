import dataclasses, collections
from mkernel import builders, ir
from mkernel.scenario import load_scenario
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
mk, c = builders.get("gemm_ar"), sc.cluster
with ir.paused_gc():
    s = mk.build(w, c, grouped=True)
T = s.tasks
print("tasks", len(T), "members", sum(t.count for t in T))
for f in ("reads", "writes", "signals", "waits", "step", "label", "index", "mask"):
    vals = [getattr(t, f) for t in T]
    print(f, "distinct objs", len(set(map(id, vals))))
regs = [r for t in T for r in t.reads + t.writes]
print("regions", len(regs), "distinct objs", len(set(map(id, regs))), "distinct values", len(set((r.buffer, r.rank, r.row0, r.row1, r.col0, r.col1) for r in regs)))
print(collections.Counter((t.op, t.role, t.count > 1, len(t.reads), len(t.writes)) for t in T).most_common(20))
print(type(regs[0]), type(regs[0]).__mro__, getattr(type(regs[0]), '__slots__', None))
print(collections.Counter(r.buffer for r in regs).most_common(10))
ws = [w for t in T for w in t.waits]
print("waits", len(ws), "distinct", len(set(map(id, ws))), "distinct signals", len(set(id(w.signal) for w in ws)))
sg = [g for t in T for g in t.signals]
print("signals", len(sg), "distinct", len(set(map(id, sg))))
sts=[t.step for t in T if t.count>1]
print("steps", len(sts), "distinct", len(set(map(id, sts))), "distinct regions tuples", len(set(id(s.regions) for s in sts)), "waits", len(set(id(s.waits) for s in sts)), "signals", len(set(id(s.signals) for s in sts)))
import collections
print(collections.Counter(len(t.waits) for t in T))
