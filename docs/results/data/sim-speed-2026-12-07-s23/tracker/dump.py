"""Dump every Cells array and hazard verdict for the row and small runs of every op (with planted bugs), from the
tree on PYTHONPATH (helper h23c's exactness check; cmp.py A.pkl B.pkl compares two dumps).
Usage, from a checkout root: dump.py OUT.pkl [quick]"""
import sys, pickle, hashlib; sys.path.insert(0, 'tests/sim')
import numpy as np
from mkernel import Cluster, DeadlockError, Workload
from mkernel.builders import get
from mkernel.sim.engine import Model
from mkernel.sim.cellgrid import Cells
from mkernel.sim.hazardlog import LoggedTracker
import test_cellgrid as tc, test_hazardlog as th

def h(x):
    if isinstance(x, np.ndarray):
        return (str(x.dtype), x.shape, hashlib.sha1(np.ascontiguousarray(x).tobytes()).hexdigest())
    return repr(x)

def cells_fp(c):
    d = {}
    for name in ("grid", "grid_rank", "grid_base", "total", "expected", "distinct_need", "need", "uid0", "read_pos", "read_first", "write_once"):
        d[name] = h(getattr(c, name))
    for e in ("rows", "cols"):
        ed = getattr(c, e)
        for f in ("u", "first", "cells", "offset"):
            d[f"{e}.{f}"] = h(getattr(ed, f))
    for sname in ("distinct", "write", "read"):
        s = getattr(c, sname)
        for f in ("base", "n", "start", "cell", "grid"):
            d[f"{sname}.{f}"] = h(getattr(s, f))
    return d

def verdict(tr):  # (the twenty-fourth session's tracker reads columns, the ones before it rows)
    return tr._verdict(*tr._calls()) if hasattr(tr, "_calls") else tr._short(tr._rows())

class Rec(LoggedTracker):
    def finish(self):
        self.verdict = verdict(self)
        super().finish()

def run(s, c, seed=0, stress=0.0):
    m = Model(s, c, None, seed=seed, stress=stress, tracker=Rec)
    try:
        m.run()
    except DeadlockError:
        return "deadlock"
    return (m.tracker.verdict, m.tracker.hazards)

out = {}
for p in tc._builds():
    s = p.values[0]
    out["cells:" + p.id] = cells_fp(Cells(s))
quick = len(sys.argv) > 2
W = th.W
for kernel, cl in (("gemm_ar", Cluster("t", 2, 2)), ("gemm_ar", Cluster("t", 2, 2, transport="efa_srd", notify="flag")),
                   ("gemm_rs", Cluster("t", 2, 2)), ("ag_gemm", Cluster("t", 2, 2)),
                   ("ring_attention", Cluster("t", 2, 2)), ("moe_dispatch_gemm", Cluster("t", 2, 2))):
    w = W if kernel.startswith(("gemm", "ag")) else Workload(kernel=kernel, m=256, n=64, k=32, tile_m=64, experts=4, topk=2)
    m = get(kernel)
    for bi, s in enumerate((m.build(w, cl, grouped=True), m.build_baseline(w, cl, grouped=True))):
        cases = [s] + th._weakened(s, every=4 if kernel != "gemm_ar" else 12)
        for ci, case in enumerate(cases[:8 if quick else 40]):
            for seed, stress in ((0, 0.0), (1, 3.0)):
                key = f"run:{kernel}:{cl.transport}:{bi}:{ci}:{seed}"
                out[key] = run(case, cl, seed, stress)
                if ci == 0 and seed == 0:
                    out["cells:" + key] = cells_fp(Cells(case))
if not quick:  # the row, built as mkernel.runner.run builds it
    import dataclasses
    import mkernel.cli as cli
    from mkernel import runner
    from mkernel.backend import get_backend
    from mkernel.cli_run import scenario_from_args
    args = cli._parser().parse_args(["run", "scenarios/paper-ib-2x8.toml", "--kernel", "gemm_ar", "--m", "32768",
                                     "--n", "32768", "--k", "2048", "--no-collapse"])
    sc = scenario_from_args(args)
    sc = dataclasses.replace(sc, cluster=get_backend("sim").cluster_for(sc.cluster))
    built = runner._build(sc, False, True, False, True, 0, False)
    fused, regions = built.fused, built.regions[0]
    out["cells:row"] = cells_fp(Cells(fused, regions))
    m = Model(fused, sc.cluster, None, seed=0, track_hazards=True, regions=regions)
    tr = m.tracker; fin = tr.finish; tr.finish = lambda: None; m.run()
    out["row:verdict"] = verdict(tr); tr.finish = fin; fin()
    out["row:hazards"] = tr.hazards
pickle.dump(out, open(sys.argv[1], "wb"))
short = sum(1 for k, v in out.items() if k.startswith("run:") and isinstance(v, tuple) and v[0])
print(len(out), "entries;", short, "runs with hazards;", sum(1 for v in out.values() if v == "deadlock"), "deadlocks")
