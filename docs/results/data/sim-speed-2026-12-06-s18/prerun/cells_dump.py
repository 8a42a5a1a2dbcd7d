"""Every array of Cells (and the tracker's derived lists) of the every-node row's fused schedule, to an npz."""
import sys, dataclasses
import numpy as np
from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import cellgrid
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=int(sys.argv[2]), n=int(sys.argv[2]), k=2048)
mk, c = builders.get("gemm_ar"), sc.cluster
with ir.paused_gc():
    s = mk.build(w, c, grouped=True)
tab = s.validate()
C = cellgrid.Cells(s, tab)
out = {}
for k, v in vars(C).items():
    if isinstance(v, np.ndarray): out[k] = v
for side in ("read", "write"):
    for f in ("base", "n", "grid", "start", "cell"):
        out[f"{side}.{f}"] = getattr(getattr(C, side), f)
for ax in ("rows", "cols"):
    for f in ("u", "first", "cells", "offset"):
        out[f"{ax}.{f}"] = getattr(getattr(C, ax), f)
out["write_once"] = np.array(C.write_once)
out["grid"] = np.array(sorted((k[0], k[1], g) for k, g in C.grid.items()), dtype=object).astype(str)
np.savez(sys.argv[1], **out)
print(len(out), "arrays")
