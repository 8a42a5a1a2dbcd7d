"""For callgrind (valgrind --tool=callgrind python cg.py b|v|vt): the every-node row's fused build at m = n = 16384,
k = 1024 (b), then validate() (v), then the hazard tracker's init on its region table (vt). Ir(v) - Ir(b) is
validate's instructions, Ir(vt) - Ir(v) the tracker init's. Run from the checkout root."""
import dataclasses, gc, sys
from mkernel import builders
from mkernel.scenario import load_scenario
import mkernel.sim.hazardlog as hl

sc = load_scenario("scenarios/paper-ib-2x8.toml")
sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel="gemm_ar", m=16384, n=16384, k=1024))
fused = builders.get("gemm_ar").build(sc.workload, sc.cluster, grouped=True)
gc.disable()
if sys.argv[1] in ("v", "vt"):
    tab = fused.validate()
if sys.argv[1] == "vt":
    hl.LoggedTracker(fused, tab)
