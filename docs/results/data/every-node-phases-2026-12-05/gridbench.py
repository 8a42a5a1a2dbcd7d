"""The hazard grids (sim/cellgrid.py Cells) of main ($BASE/sim/cellgrid.py, a `git archive` of main) and of this
checkout, in one process: array for array on every builder's fused and baseline builds (grouped and flat) on four
small clusters and on the 2 x 8 GEMM+AR 32768^2 every-node build (the branch's new edge tables, `_below`, left
out); then, on the 2 x 8 build, Cells(s, table) of each, alternately, CPU s per call (each one's first call pays
first-touch page faults). usage: gridbench.py [rounds]"""
import dataclasses
import importlib.util
import os
import sys
import time

import numpy as np

from mkernel import Cluster, Workload, builders, ir
from mkernel.builders import KERNELS
from mkernel.scenario import load_scenario
from mkernel.sim import cellgrid as branch

spec = importlib.util.spec_from_file_location("cellgrid_main", os.environ.get("BASE", "/tmp/evph/base") + "/sim/cellgrid.py")
main = importlib.util.module_from_spec(spec)
spec.loader.exec_module(main)


def arrays(c) -> dict:
    out = {}
    for k, v in vars(c).items():
        if isinstance(v, (branch.Side, main.Side, branch._Edges, main._Edges)):
            out.update({f"{k}.{kk}": np.asarray(vv) for kk, vv in vars(v).items() if kk != "_below"})
        else:
            out[k] = v if isinstance(v, np.ndarray) else np.array(repr(v))
    return out


def same(s, table=None) -> bool:
    a, b = arrays(main.Cells(s, table)), arrays(branch.Cells(s, table))
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) and a[k].dtype == b[k].dtype for k in a)


builds = bad = 0
w = Workload(m=512, n=1024, k=64, chunk_tiles=2, baseline_chunk_kib=64)
for cluster in (Cluster("t", 2, 2), Cluster("t", 1, 4), Cluster("t", 2, 4, transport="efa_srd"), Cluster("t", 4, 2)):
    for name in KERNELS:
        m = builders.get(name)
        for grouped in (True, False):
            for build in (m.build, m.build_baseline):
                try:
                    with ir.paused_gc():
                        s = build(w, cluster, grouped=grouped)
                except Exception:  # a builder that does not take this shape: not a grid question
                    continue
                builds += 1
                bad += not same(s)
sc = load_scenario("scenarios/paper-ib-2x8.toml")
with ir.paused_gc():
    s = builders.get("gemm_ar").build(dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048),
                                      sc.cluster, grouped=True)
    table = s.validate(races=True)
builds += 1
bad += not same(s, table)
print(f"{builds} builds; grids differ on {bad}")
spent: dict = {"main": [], "branch": []}
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    for name, mod in (("main", main), ("branch", branch)):
        cpu = time.process_time()
        c = mod.Cells(s, table)
        spent[name].append(round(time.process_time() - cpu, 3))
        del c
print(spent, "medians", {k: sorted(v)[len(v) // 2] for k, v in spent.items()})
