"""One Cells (the hazard grids) in a fresh process, after the build: the first run, as the CLI row makes it.
usage: grids_first_run.py LABEL (run once per code, alternately; PYTHONPATH selects the code)"""
import dataclasses, time, sys
from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import cellgrid
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
m, c = builders.get("gemm_ar"), sc.cluster
with ir.paused_gc():
    s = m.build(w, c, grouped=True)
with ir.paused_gc():
    t = time.process_time(); w0 = time.perf_counter(); cellgrid.Cells(s); print(sys.argv[1], "first Cells", round(time.process_time() - t, 3), "cpu", round(time.perf_counter() - w0, 3), "wall")
