"""Fingerprint of the every-node 2x8 row, as sim-event-path-2026-12-05's fingerprint.py (the same arrays and
metadata, so fingerprint_cmp_core.py compares the two), for a core whose engine hands the hazard tracker's
calls to a native log (sim/calllog.py) rather than to the tracker's methods, which that script patched: here
each run's tracker is wrapped (Model.run patched) by a recorder that notes each call and hands it on, and the
engine's log set to hand each call to it. On a core without the log (the base) the engine calls the recorder
directly. usage: fingerprint.py out.npz"""
import dataclasses, sys, json
import numpy as np
from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend, engine
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
mk, c, sim = builders.get("gemm_ar"), sc.cluster, SimBackend()
with ir.paused_gc():
    fused = mk.build(w, c, grouped=True)
    base = mk.build_baseline(w, c, grouped=True, library_tasks=False)
rec = []


class Recorder:
    """The run's tracker, each check and landing noted (entry position, first member, members, time, kind)."""

    def __init__(self, inner, env):
        self.inner, self.env = inner, env

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _span(self, task, first, n):
        p = self.inner._pos.get(id(task))
        if p is None:
            return self.inner._member_of(task)
        return p, first, task.count - first if n is None else n

    def landed_writes(self, task, first=0, n=None):
        rec.append((*self._span(task, first, n), self.env.now, 0)); self.inner.landed_writes(task, first, n)

    def check_reads(self, task, now, first=0, n=None):
        rec.append((*self._span(task, first, n), now, 1)); self.inner.check_reads(task, now, first, n)

    def check_outputs_landed(self, rank, now):
        self.inner.check_outputs_landed(rank, now)


orun = engine.Model.run
grab = {}
def run(self):
    if type(self.tracker).__name__ == "LoggedTracker":
        self.tracker = Recorder(self.tracker, self.env)
        if hasattr(self, "log"):  # (the engine calls its log: a Forward hands each call to the recorder)
            from mkernel.sim.calllog import Forward
            self.log = Forward(self.tracker)
    orun(self)
    grab["links"] = [(r, l.name, l.bytes, l.busy_bytes) for r, l in self.all_links()]
    grab["busy"] = list(self.compute_busy)
engine.Model.run = run
out = {}
st = sim.run(fused, c, collapse=False)
uid0 = np.zeros(len(fused.tasks) + 1, np.int64); np.cumsum([t.count for t in fused.tasks], out=uid0[1:])
chk = np.full(uid0[-1], np.nan); land = np.full(uid0[-1], np.nan); nland = np.zeros(uid0[-1], int)
for p, f, n, t, kind in rec:
    u = uid0[p] + f
    if kind: chk[u:u+n] = t
    else: land[u:u+n] = t; nland[u:u+n] += 1
out["chk"], out["land"], out["nland"] = chk, land, nland
def summ(st):
    return {"time": repr(st.time_s), "per_rank": [repr(x) for x in st.per_rank_s], "events": st.events,
            "bytes": repr(st.bytes_total), "metrics": repr(st.metrics), "hazards": repr(st.hazards)}
meta = {"tracked": summ(st), "links": repr(grab["links"]), "busy": repr(grab["busy"])}
rec.clear()
st2 = sim.run(fused, c, collapse=False, hazards=False)
meta["untracked"] = summ(st2); meta["ulinks"] = repr(grab["links"]); meta["ubusy"] = repr(grab["busy"])
st3 = sim.run(base, c, collapse=False)
meta["base"] = summ(st3)
st4 = sim.run(fused, c, collapse=True)
meta["collapsed"] = summ(st4)
out["meta"] = np.array(json.dumps(meta))
np.savez(sys.argv[1], **out)
print(meta["tracked"]["time"], meta["tracked"]["events"], meta["untracked"]["events"], meta["base"]["time"], meta["collapsed"]["time"])
