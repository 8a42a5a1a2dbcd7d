"""The tracker phase alone on the every-node row: build the fused schedule, load its table and log
(dump.py); mode 'none' stops there, 'setup' makes LoggedTracker, 'all' also runs finish.
usage: ph.py PKL MODE"""
import pickle, sys, gc, dataclasses
from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import hazardlog as H
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
mk, c = builders.get("gemm_ar"), sc.cluster
with ir.paused_gc():
    s = mk.build(w, c, grouped=True)
gc.disable()
with open(sys.argv[1], "rb") as f:
    table, log, ends = pickle.load(f)
tasks = s.tasks
log[::4] = [tasks[p] for p in log[::4]]
mode = sys.argv[2]
if mode != "none":
    t = H.LoggedTracker(s, table)
    if mode == "all":
        t._log, t._ends = log, ends
        t.finish()
        assert t.hazards == []
