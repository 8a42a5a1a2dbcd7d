import dataclasses
from itertools import repeat
import numpy as np
from mkernel import builders, ir
from mkernel.members import int_array
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend, hazardlog as H, hazards as HZ
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
mk, c = builders.get("gemm_ar"), sc.cluster
with ir.paused_gc():
    fused = mk.build(w, c, grouped=True)
orig = H.LoggedTracker.finish
calls = {"member": 0, "unobserved": 0}
om, ou = HZ.ArrivalTracker.member, HZ.ArrivalTracker.unobserved
def m(self, t, i): calls["member"] += 1; return om(self, t, i)
def u(self, *a): calls["unobserved"] += 1; return ou(self, *a)
HZ.ArrivalTracker.member, HZ.ArrivalTracker.unobserved = m, u
def fin(self):
    tasks = self._log[::4]
    p = int_array(list(map(self._pos.get, map(id, tasks), repeat(-1))))
    print("plain members logged", (p < 0).sum(), "of", len(p), calls)
    orig(self)
H.LoggedTracker.finish = fin
SimBackend().run(fused, c, collapse=False)
