"""validate()'s and the hazard tracker's sub-steps on the every-node row's fused build, the first call in a fresh
process (as in a run): user s, system s, minor faults. usage: python substeps.py"""
import dataclasses, importlib, resource
from mkernel import builders
from mkernel.scenario import load_scenario
import mkernel.sim.cellgrid as cg, mkernel.sim.hazards as hz

V = importlib.import_module("mkernel.validate")
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
fused = builders.get("gemm_ar").build(w, sc.cluster, grouped=True)


def ru():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime, r.ru_minflt


acc = {}


def wrap(mod, name):
    f = getattr(mod, name)

    def w(*a, **k):
        t = ru()
        r = f(*a, **k)
        u = ru()
        acc[name] = tuple(round(u[i] - t[i], 3) for i in range(3))
        return r
    setattr(mod, name, w)


for n in ("read_regions", "signal_table", "cleared", "check_outputs", "_check_cycles", "_check_signals"):
    wrap(V, n)
for n in ("_layout", "_rect", "_cells", "_own", "_once"):
    wrap(cg.Cells, n)
wrap(cg, "_pairs")
wrap(cg, "_Rows")
for label, call in (("validate", lambda: fused.validate()), ("tracker", lambda: hz.ArrivalTracker(fused, tab))):
    acc.clear()
    t = ru()
    r = call()
    u = ru()
    tab = r if label == "validate" else tab
    print(label, [round(u[i] - t[i], 3) for i in range(3)], acc)
