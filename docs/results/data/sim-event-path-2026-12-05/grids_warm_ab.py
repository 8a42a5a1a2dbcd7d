"""The hazard grids (sim/cellgrid.py Cells) of main (loaded from /tmp/ss/base/sim/cellgrid.py) and of this branch,
alternately in one process, warm: CPU s of each. usage: grids_warm_ab.py ROUNDS"""
import dataclasses, time, importlib.util, sys
from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import cellgrid as new
spec = importlib.util.spec_from_file_location("cellgrid_main", "/tmp/ss/base/sim/cellgrid.py")
old = importlib.util.module_from_spec(spec); spec.loader.exec_module(old)
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
m, c = builders.get("gemm_ar"), sc.cluster
with ir.paused_gc():
    s = m.build(w, c, grouped=True)
res = {"main": [], "branch": []}
for i in range(int(sys.argv[1])):
    for name, mod in (("main", old), ("branch", new)):
        with ir.paused_gc():
            t = time.process_time(); mod.Cells(s); res[name].append(round(time.process_time() - t, 3))
print(res)
