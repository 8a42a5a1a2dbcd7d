"""Every array of the hazard tracker (LoggedTracker: its Cells, their Sides and edges, and the tracker's own
arrays and lists) for every builder's fused and baseline builds (grouped and flat) on four small clusters,
the hand-made schedules of tests/sim/test_cellgrid.py, and the 2 x 8 GEMM+AR 32768^2 every-node build, pickled
to OUT. Run it with each checkout's venv from that checkout's root; compare with grids_cmp.py.
Lazily made parts (cached properties) are read first, so they are compared too.
Usage: python dump_grids.py OUT.pkl"""
import dataclasses
import pickle
import sys

import numpy as np

from mkernel import builders, ir
from mkernel.errors import ScheduleError
from mkernel.scenario import load_scenario
from mkernel.sim import hazardlog

LAZY = ("_once", "_uid0", "_rbase", "_nr", "_wbase", "_nw")


def arrays(tr) -> dict:
    for name in LAZY:
        getattr(tr, name)
    c = tr.cells
    out = {}
    for owner, obj in (("tracker", tr), ("cells", c)):
        for k, v in vars(obj).items():
            if k in ("cells", "schedule", "_pos", "_log", "_ends"):
                continue
            if hasattr(v, "__dict__") and not isinstance(v, np.ndarray):
                out.update({f"{owner}.{k}.{kk}": np.asarray(vv) for kk, vv in vars(v).items()})
            else:
                out[f"{owner}.{k}"] = v if isinstance(v, np.ndarray) else np.array(repr(v))
    for k in ("read", "write", "rows", "cols"):  # (where a checkout makes them lazily)
        for kk in dir(getattr(c, k)):
            v = getattr(getattr(c, k), kk)
            if isinstance(v, np.ndarray):
                out.setdefault(f"cells.{k}.{kk}", v)
    out["tracker._pos"] = np.array([tr._pos[id(t)] for t in tr.schedule.tasks])
    return out


def schedules():
    sys.path.insert(0, "docs/results/data/every-node-phases-2026-12-05")  # (the builds schedhash.py lists)
    from schedhash import CLUSTERS, builds
    for case, s in builds(CLUSTERS[:4], ({},)):
        if not isinstance(s, Exception):  # (a builder that does not take this shape)
            yield case, s
    sys.path.insert(0, "tests/sim")
    import test_cellgrid
    for p in test_cellgrid._builds():
        yield "test_cellgrid-" + p.id, p.values[0]
    sc = load_scenario("scenarios/paper-ib-2x8.toml")
    big = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
    with ir.paused_gc():
        yield "gemm_ar-32768-every-node", builders.get("gemm_ar").build(big, sc.cluster, grouped=True)


out = {}
for name, s in schedules():
    with ir.paused_gc():
        try:
            table = s.validate()
        except ScheduleError:  # (a test's hand-made schedule: the tracker reads its regions itself)
            table = None
        out[name] = arrays(hazardlog.LoggedTracker(s, table))
with open(sys.argv[1], "wb") as fh:
    pickle.dump(out, fh)
print(len(out), "schedules")
