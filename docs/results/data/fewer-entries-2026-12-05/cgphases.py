"""The every-node row's phases as the runner does them (fused build, validate, the tracked fused run with its hazard
grids), under callgrind: after each phase the script asks callgrind_control for a dump, so each dump file holds one
phase's instructions (Ir: the same on a loaded machine). usage (from the checkout root):
  valgrind --tool=callgrind --callgrind-out-file=OUT.%p python cgphases.py off|on|every|every8|chunk [M]
Prints the simulated fused us and the events; the dumps are OUT.PID.1 (imports), .2 (build), .3 (validate),
.4 (run with grids), and the final one (exit)."""
import dataclasses
import os
import subprocess
import sys


def dump() -> None:
    subprocess.run(["callgrind_control", "-d", str(os.getpid())], check=True, capture_output=True, timeout=600)


from mkernel import builders, ir  # noqa: E402
from mkernel.builders import gemm_ar  # noqa: E402
from mkernel.scenario import load_scenario  # noqa: E402
from mkernel.sim import SimBackend  # noqa: E402

gemm_ar.ROW_GROUPS = {"off": False, "on": True, "every": "every", "every8": "every", "chunk": False}[sys.argv[1]]
gemm_ar.CHUNK_WAITS = sys.argv[1] == "chunk"  # what-if: a chunk's intra reductions and broadcasts block together
if sys.argv[1] == "every8":  # the what-if's schedule with today's groups: one per owner cycle (none joined)
    gemm_ar._cycles = lambda cut, g, rel: [(list(run), 0) for run in cut]
size = int(sys.argv[2]) if len(sys.argv) > 2 else 32768
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=size, n=size, k=2048)
c, sim = sc.cluster, SimBackend()
dump()
with ir.paused_gc():
    fused = builders.get("gemm_ar").build(w, c, grouped=True)
    dump()
    table = fused.validate(races=True)
    dump()
st = sim.run(fused, c, collapse=False, regions=table)
dump()
print(repr(st.time_s * 1e6), st.events, len(fused.tasks), flush=True)
os._exit(0)
