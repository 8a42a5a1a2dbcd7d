import dataclasses
import numpy as np
from mkernel import builders, ir, validation as V
from mkernel.scenario import load_scenario
from mkernel.sim import cellgrid
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
mk, c = builders.get("gemm_ar"), sc.cluster
with ir.paused_gc():
    s = mk.build(w, c, grouped=True)
tab = V.validate(s)
C = cellgrid.Cells(s, tab)
for name, side in (("read", C.read), ("write", C.write)):
    print(name, "rows", len(side.grid), "cells", len(side.cell), "entries with rows", (side.n > 0).sum())
print("total cells", C.total, "grids", len(C.grid))
recs = tab[0]
print("records", len(recs), "stepping rank", (recs[:,6]!=0).sum(), "rows", (recs[:,7]!=0).sum(), "cols", (recs[:,8]!=0).sum(), "rotate", (recs[:,9]!=0).sum())
