"""(The sim-event-path helper's grids_equal.py, the edge tables `_below` left out of the comparison: they are new.)
The hazard tracker's grids (sim/cellgrid.py Cells) of main and of this branch, array for array, on every
builder's fused and baseline builds (grouped and flat) on four small clusters, and on the 2 x 8 GEMM+AR 32768^2
every-node build. Main's module is loaded from $BASE/sim/cellgrid.py (a `git archive` of main)."""
import dataclasses
import importlib.util
import os
import sys

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


def same(s) -> bool:
    a, b = arrays(main.Cells(s)), arrays(branch.Cells(s))
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
                except Exception as e:  # a builder that does not take this shape: not a grid question
                    continue
                builds += 1
                if not same(s):
                    bad += 1
                    print("DIFFER", name, cluster.nodes, cluster.gpus_per_node, grouped, build.__name__)
sc = load_scenario("scenarios/paper-ib-2x8.toml")
big = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
with ir.paused_gc():
    s = builders.get("gemm_ar").build(big, sc.cluster, grouped=True)
builds += 1
bad += not same(s)
print(f"{builds} builds; grids differ on {bad}")
sys.exit(1 if bad else 0)
