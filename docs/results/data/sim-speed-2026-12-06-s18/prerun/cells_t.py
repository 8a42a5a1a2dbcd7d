import gc, time, collections
from mkernel.sim import cellgrid as CG, gridedges as GE
from row import fused  # (the row's fused build, shared)
tab = fused.validate()
acc = collections.defaultdict(float)
def wrap(obj, name, label):
    f = getattr(obj, name)
    def w(*a, **k):
        s = time.perf_counter(); r = f(*a, **k); acc[label] += time.perf_counter() - s; return r
    setattr(obj, name, w)
wrap(CG._Rows, "__init__", "_Rows"); wrap(CG.Cells, "_layout", "_layout"); wrap(CG.Cells, "_edges", "_edges")
wrap(CG.Cells, "_cells", "_cells"); wrap(CG.Cells, "_own", "_own"); wrap(CG, "_pairs", "_pairs"); wrap(CG, "member_slots", "member_slots")
wrap(GE.Edges, "_build", "Edges._build"); wrap(CG._Rows, "along", "along"); wrap(CG.Stepped, "keys", "Stepped.keys")
best = None
gc.disable()
for i in range(7):
    acc.clear()
    s = time.perf_counter(); CG.Cells(fused, tab); acc["TOTAL"] = time.perf_counter() - s
    if best is None or acc["TOTAL"] < best["TOTAL"]: best = dict(acc)
print(" ".join(f"{k} {v*1e3:.1f}" for k, v in best.items()))
