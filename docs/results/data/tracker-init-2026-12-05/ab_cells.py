"""Cells (sim/cellgrid.py) of several checkouts in one process, alternating, on the 2 x 8 GEMM+AR 32768^2
every-node build: the grids alone, warm, GC paused, with no process start or import between them.
Usage: python ab_cells.py ROUNDS path/to/cellgrid.py ... (from a checkout's root; its mkernel builds)"""
import dataclasses
import importlib.util
import sys
import time

from mkernel import builders, ir
from mkernel.scenario import load_scenario

sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
with ir.paused_gc():
    fused = builders.get("gemm_ar").build(w, sc.cluster, grouped=True)
    table = fused.validate()
mods = []
for i, path in enumerate(sys.argv[2:]):
    spec = importlib.util.spec_from_file_location(f"cellgrid{i}", path)
    mods.append(importlib.util.module_from_spec(spec))
    spec.loader.exec_module(mods[-1])
times = [[] for _ in mods]
for _ in range(int(sys.argv[1])):
    for m, ts in zip(mods, times):
        t = time.process_time()
        with ir.paused_gc():
            grids = m.Cells(fused, table)
        ts.append(time.process_time() - t)
        del grids
for path, ts in zip(sys.argv[2:], times):
    print(path, "min %.3f median %.3f" % (min(ts), sorted(ts)[len(ts) // 2]), " ".join("%.3f" % x for x in ts))
