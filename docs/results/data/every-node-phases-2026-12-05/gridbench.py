"""The hazard grids of the 2 x 8 GEMM+AR 32768^2 every-node build: Cells(s, table) of main ($BASE/sim/cellgrid.py,
a `git archive` of main) and of this checkout, alternately in one process, CPU s each (the first call of each pays
first-touch page faults); the first pair compared array for array (the edge tables, `_below`, are new: listed as
extra). usage: gridbench.py [rounds]"""
import dataclasses, importlib.util, os, sys, time
import numpy as np
from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import cellgrid as branch
spec = importlib.util.spec_from_file_location("cellgrid_main", os.environ.get("BASE", "/tmp/evph/base") + "/sim/cellgrid.py")
main = importlib.util.module_from_spec(spec); spec.loader.exec_module(main)
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
with ir.paused_gc():
    s = builders.get("gemm_ar").build(w, sc.cluster, grouped=True)
    t = s.validate(races=True)
def arrays(c):
    out = {}
    for k, v in vars(c).items():
        if isinstance(v, (branch.Side, main.Side, branch._Edges, main._Edges)):
            out.update({f"{k}.{kk}": np.asarray(vv) for kk, vv in vars(v).items()})
        else:
            out[k] = v if isinstance(v, np.ndarray) else np.array(repr(v))
    return out
res = {"main": [], "branch": []}
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    for name, mod in (("main", main), ("branch", branch)):
        t0 = time.process_time(); c = mod.Cells(s, t); res[name].append(round(time.process_time() - t0, 3))
        if i == 0:
            if name == "main": A = arrays(c)
            else:
                B = arrays(c)
                diff = [k for k in A if k not in B or not (np.array_equal(A[k], B[k]) and A[k].dtype == B[k].dtype)]
                print("differ:", diff, "extra:", [k for k in B if k not in A])
        del c
print(res, "medians", {k: sorted(v)[len(v)//2] for k, v in res.items()})
