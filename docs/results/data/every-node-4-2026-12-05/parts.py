"""The every-node 2 x 8 GEMM+AR 32768^2 k2048 run's parts, as runner.run(collapse=False) makes them, each
timed alone (CPU s): the fused build, its validate(), the hazard tracker's set-up (its grids: ArrivalTracker's
__init__, wrapped), the fused run tracked (set-up included) and untracked, and the baseline's build, validate
and tracked run; with the fused build's entries. Where validate() returns the region table (this branch), the
runs are handed it, as the runner hands it. Run from a checkout's root (main: PYTHONPATH at a `git archive`,
see measure.sh). The every-node-3s helper's parts.py, but for the table."""
import dataclasses
import json
import time

from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend
from mkernel.sim import hazards

spent: dict = {}


def timed(name, fn):
    cpu = time.process_time()
    out = fn()
    spent[name] = round(spent.get(name, 0.0) + time.process_time() - cpu, 2)
    return out


init = hazards.ArrivalTracker.__init__
hazards.ArrivalTracker.__init__ = lambda self, s, *a: timed("tracker set-up", lambda: init(self, s, *a))
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
m, c, sim = builders.get("gemm_ar"), sc.cluster, SimBackend()
with ir.paused_gc():  # (as the builders, validate and the simulator each run)
    fused = timed("build fused", lambda: m.build(w, c, grouped=True))
    base = timed("build baseline", lambda: m.build_baseline(w, c, grouped=True, library_tasks=False))
    table = timed("validate fused", lambda: fused.validate(races=True))
    base_table = timed("validate baseline", lambda: base.validate(races=True))
given = (lambda t: {} if t is None else {"regions": t})
tracked = timed("simulate fused, tracked", lambda: sim.run(fused, c, collapse=False, **given(table)))
timed("simulate baseline, tracked", lambda: sim.run(base, c, collapse=False, **given(base_table)))
untracked = timed("simulate fused, untracked", lambda: sim.run(fused, c, collapse=False, hazards=False))
spent["fused entries, members"] = [len(fused.tasks), sum(t.count for t in fused.tasks)]
spent["fused us (tracked, untracked), events"] = [tracked.time_s * 1e6, untracked.time_s * 1e6, tracked.events]
print(json.dumps(spent))
