"""Self time (perf_counter, wrappers subtracted from parents) of the run phase's main functions in the tracked fused
run of the every-node row at SIZE (default 16384): where the run's time goes. usage: python shares.py [SIZE]"""
import dataclasses, collections, time, sys
from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend, engine, dispatch, flows, signals, network
SIZE = int(sys.argv[1]) if len(sys.argv) > 1 else 16384
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=SIZE, n=SIZE, k=SIZE // 16)
c, sim = sc.cluster, SimBackend()
with ir.paused_gc():
    fused = builders.get("gemm_ar").build(w, c, grouped=True)
    table = fused.validate(races=True)
T = collections.Counter(); N = collections.Counter()
stack = []
pc = time.perf_counter
def wrap(cls, name):
    f = getattr(cls, name)
    def wr(*a, **k):
        t = pc(); stack.append(0.0)
        r = f(*a, **k)
        d = pc() - t; inner = stack.pop()
        T[name] += d - inner; N[name] += 1
        if stack: stack[-1] += d
        return r
    setattr(cls, name, wr)
for cls, names in ((engine.Model, "_signal _flags _bulk _resume _nvlink _work _worked _copied _paid _free _landed _later _due _block _released _join _waits_of _ready_split".split()),
                   (flows.FlowNet, "transfer_plan _wake _flush".split()), (signals.SignalBoard, ["bump_keys"]),
                   (network.Network, ["send"]), (signals.CountingEnvironment, ["_slots", "_resume"])):
    for n in names: wrap(cls, n)
t0 = pc()
st = sim.run(fused, c, collapse=False, regions=table)
tot = pc() - t0
print("total", round(tot, 3), "accounted", round(sum(T.values()), 3))
for k, v in T.most_common(): print(f"{k:16s} {v:7.3f} {N[k]:8d} {v/N[k]*1e6:6.2f}us")
