"""The every-node row's tracked fused run under callgrind, counted alone: the build and validate() run with
instrumentation off; the script then waits for callgrind.sh to switch it on, runs sim.run as the runner calls it
(grids included) and leaves at once (os._exit: no teardown counted). usage: callgrind_run.py M TAG"""
import dataclasses
import os
import sys
import time

from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend

sc = load_scenario("scenarios/paper-ib-2x8.toml")
size, tag = int(sys.argv[1]), sys.argv[2]
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=size, n=size, k=2048)
m, c, sim = builders.get("gemm_ar"), sc.cluster, SimBackend()
with ir.paused_gc():
    fused = m.build(w, c, grouped=True)
    table = fused.validate(races=True)
from mkernel.sim import keys as _k; _k.PRE[id(fused)] = _k.KeySpace(fused.world, fused)
flag = os.environ.get("FLAGS", "/tmp")
open(f"{flag}/flag-{tag}-start", "w").close()
for _ in range(6000):  # (bounded: 5 minutes)
    if os.path.exists(f"{flag}/flag-{tag}-go"):
        break
    time.sleep(0.05)
st = sim.run(fused, c, collapse=False, regions=table)
print(repr(st.time_s * 1e6), st.events, flush=True)
os._exit(0)
