"""The every-node row's phases as the runner does them (fused build, validate, the tracked fused run with its hazard
grids), under callgrind: after each phase the script asks callgrind_control for a dump, so each dump file holds one
phase's instructions (Ir: the same on a loaded machine). The fewer-entries probe's cgphases.py without its knobs: the
code measured is whichever mkernel is imported (main's with PYTHONPATH set to a checkout of it).
usage: valgrind --tool=callgrind --callgrind-out-file=OUT.%p python cgphases.py
Prints the simulated fused us, the events and the entries; the dumps are OUT.PID.1 (imports), .2 (build),
.3 (validate), .4 (run with grids), and the final one (exit)."""
import dataclasses
import os
import subprocess


def dump() -> None:
    subprocess.run(["callgrind_control", "-d", str(os.getpid())], check=True, capture_output=True, timeout=600)


from mkernel import builders, ir  # noqa: E402
from mkernel.scenario import load_scenario  # noqa: E402
from mkernel.sim import SimBackend  # noqa: E402

sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
c, sim = sc.cluster, SimBackend()
dump()
with ir.paused_gc():
    fused = builders.get("gemm_ar").build(w, c, grouped=True)
    dump()
    table = fused.validate(races=True)
    dump()
st = sim.run(fused, c, collapse=False, regions=table)
dump()
print(builders.__file__, repr(st.time_s * 1e6), st.events, len(fused.tasks), flush=True)
os._exit(0)
