"""Cells' arrays (every read's and write's rows, need, expected, grids, edges) of the row's fused schedule, to an npz. usage: cdump.py OUT.npz"""
import sys
out_path = sys.argv[1]
sys.argv = [sys.argv[0], __import__("os").path.join(__import__("os").path.dirname(__import__("os").path.abspath(__file__)), "log.pkl"), "none"]
exec(open(__import__("os").path.join(__import__("os").path.dirname(__import__("os").path.abspath(__file__)), "ph.py")).read())
import numpy as np
from mkernel.sim import cellgrid
C = cellgrid.Cells(s, table)
out = {}
for k in ("need", "expected", "uid0", "read_pos", "read_first", "grid_base", "grid_rank"):
    out[k] = getattr(C, k)
for side in ("read", "write"):
    for f in ("base", "n", "grid", "start", "cell"):
        out[f"{side}.{f}"] = np.asarray(getattr(getattr(C, side), f))
for ax in ("rows", "cols"):
    for f in ("u", "first", "cells", "offset"):
        out[f"{ax}.{f}"] = getattr(getattr(C, ax), f)
out["write_once"] = np.array(C.write_once)
out["grid"] = np.array(sorted((k[0], k[1], g) for k, g in C.grid.items()), dtype=object).astype(str)
np.savez(out_path, **out)
print(len(out), "arrays")
