"""The every-node row's tracked fused run alone under callgrind: build and validate (races on, as the runner does),
then a callgrind dump; the run with validate's table (``regions=table``, as the runner hands it); a dump again. So the
second dump file (OUT.PID.2) holds the fused run's instructions (Ir: the same on a loaded machine).
usage (from the checkout root, or with PYTHONPATH at a baseline tree):
  PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=OUT.%p python cgrun.py [M]
Prints the simulated fused us and the events."""
import dataclasses
import os
import subprocess
import sys

from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend


def dump() -> None:
    subprocess.run(["callgrind_control", "-d", str(os.getpid())], check=True, capture_output=True, timeout=900)


size = int(sys.argv[1]) if len(sys.argv) > 1 else 32768
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=size, n=size, k=size // 16)
c, sim = sc.cluster, SimBackend()
with ir.paused_gc():
    fused = builders.get("gemm_ar").build(w, c, grouped=True)
    table = fused.validate(races=True)
dump()
st = sim.run(fused, c, collapse=False, regions=table)
dump()
print(repr(st.time_s * 1e6), st.events, flush=True)
os._exit(0)
