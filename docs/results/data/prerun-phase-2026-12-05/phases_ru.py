"""Per phase of the every-node row, in one process: user s, system s and minor page faults (getrusage), with the
hazard tracker's init and finish apart. usage (checkout root, venv active): python phases_ru.py on|off
(on: hazards tracked, the row's default; off: hazards=False). The run is /work/notes/phases.py's."""
import collections, dataclasses, resource, sys
import mkernel.builders.gemm_ar as g, mkernel.ir as ir, mkernel.sim.engine as se, mkernel.sim.hazardlog as hl
from mkernel import runner
from mkernel.scenario import load_scenario

T = collections.defaultdict(lambda: [0.0, 0.0, 0])


def ru():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime, r.ru_minflt


def wrap(obj, name, label):
    f = getattr(obj, name)

    def w(*a, **k):
        t = ru()
        r = f(*a, **k)
        u = ru()
        for i in range(3):
            T[label][i] += u[i] - t[i]
        return r
    setattr(obj, name, w)


wrap(g, "build", "build fused")
wrap(ir.Schedule, "validate", "validate")
wrap(se.Model, "__init__", "engine init")
wrap(se.Model, "run", "engine run")
wrap(hl.LoggedTracker, "__init__", "tracker init")
wrap(hl.LoggedTracker, "finish", "tracker finish")
sc = load_scenario("scenarios/paper-ib-2x8.toml")
sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048))
t = ru()
runner.run(sc, collapse=False, hazards=None if sys.argv[1] == "on" else False)
u = ru()
T["total in-process"] = [u[i] - t[i] for i in range(3)]
print(sys.argv[1], " ".join(f"{k}={v[0]:.3f}/{v[1]:.3f}/{v[2]}" for k, v in T.items()))
