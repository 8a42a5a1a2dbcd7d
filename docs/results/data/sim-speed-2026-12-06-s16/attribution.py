"""Wall time inside the board's calls (bump_keys, wait_key, run_bumps, flat_keys, the wait checks) during the
every-node row's tracked fused run, each wrapped with perf_counter_ns. usage: python attribution.py 32768"""
import dataclasses, time, sys, collections
from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend
from mkernel.sim import signals as S, engine as E, runs as R, dispatch as D
sc = load_scenario("scenarios/paper-ib-2x8.toml")
size = int(sys.argv[1])
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=size, n=size, k=2048)
m, c, sim = builders.get("gemm_ar"), sc.cluster, SimBackend()
acc = collections.Counter(); calls = collections.Counter()
pc = time.perf_counter_ns
def wrap(obj, name, label):
    f = getattr(obj, name)
    def w(*a, **k):
        t = pc(); r = f(*a, **k); acc[label] += pc() - t; calls[label] += 1; return r
    setattr(obj, name, w)
wrap(S.SignalBoard, "bump_keys", "bump_keys (incl. releases)")
wrap(S.SignalBoard, "wait_key", "wait_key")
wrap(E, "run_bumps", "run_bumps")
wrap(E, "flat_keys", "flat_keys")
wrap(R.Waits, "_waits_of", "_waits_of")
wrap(R.Waits, "_blocking", "_blocking")
wrap(E.Model, "_released", "_released")
with ir.paused_gc():
    fused = m.build(w, c, grouped=True)
    table = fused.validate(races=True)
    t = time.process_time()
    st = sim.run(fused, c, collapse=False, regions=table)
    tot = time.process_time() - t
print(f"run {tot:.2f} s CPU (instrumented)")
for k, v in acc.most_common(): print(f"{v/1e6:8.1f} ms {calls[k]:8d} calls  {k}")
