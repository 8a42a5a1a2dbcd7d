import dataclasses, time, gc, collections, sys
from mkernel import builders, ir, validation as V, signal_table as ST, members, screen, coverage
from mkernel.members import Entries
from mkernel.scenario import load_scenario
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
mk, c = builders.get("gemm_ar"), sc.cluster
with ir.paused_gc():
    s = mk.build(w, c, grouped=True)
acc = collections.defaultdict(float)
def wrap(mod, name, label=None):
    f = getattr(mod, name)
    def w(*a, **k):
        t = time.perf_counter(); r = f(*a, **k); acc[label or name] += time.perf_counter() - t; return r
    setattr(mod, name, w)
for n in ("_bumps", "_waits", "_dense"): wrap(ST, n)
wrap(V, "signal_table"); wrap(V, "region_table"); wrap(V, "cleared"); wrap(V, "check_outputs"); wrap(V, "_check_cycles"); wrap(V, "_check_signals")
wrap(members, "_records"); wrap(screen, "_regions"); wrap(screen, "_arity"); wrap(screen, "_groups")
gc.disable()
best = None
for i in range(7):
    acc.clear(); t = time.perf_counter(); V.validate(s); acc["TOTAL"] = time.perf_counter() - t
    if best is None or acc["TOTAL"] < best["TOTAL"]: best = dict(acc)
print(" ".join(f"{k} {v*1e3:.1f}" for k, v in best.items()))
