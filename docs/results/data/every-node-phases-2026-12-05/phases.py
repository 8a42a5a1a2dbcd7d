"""The every-node row's CLI command (`mkernel run scenarios/paper-ib-2x8.toml --kernel gemm_ar --m 32768 --n 32768
--k 2048 --no-collapse`), run in this process through mkernel.cli.main, with each phase's CPU time taken by
wrapping it: imports, build (fused, baseline), validate (both schedules), the hazard grids (the tracker's set-up),
the rest of the model's set-up, the SimPy runs (fused and baseline), and what is left of the sim backend, the
runner and the CLI. Each figure excludes the wrapped phases inside it, so they add up to the process's CPU after
interpreter start. DETAIL=1 also wraps the parts of validate, of the grids and of the build (listed indented).
Prints three lines: CPU s per phase (JSON), the garbage collector's passes and time, sys CPU s per phase.
Run from a checkout's root (main: PYTHONPATH at a `git archive` of it, as measure.sh does)."""
import contextlib
import gc
import importlib
import io
import json
import os
import sys
import time

T0 = time.process_time()
spent: dict = {}  # label -> CPU s, wrapped callees excluded
sys_s: dict = {}  # label -> sys CPU s, the same way
stack: list = []  # per open call: [CPU, sys] of the wrapped calls inside it
collections = {"passes": 0, "s": 0.0}


def _gc(phase, info):
    if phase == "start":
        collections["at"] = time.process_time()
    else:
        collections["passes"] += 1
        collections["s"] += time.process_time() - collections["at"]


gc.callbacks.append(_gc)


def wrap(owner, name, label):
    fn = getattr(owner, name)

    def timed(*a, **k):
        cpu, sys0 = time.process_time(), os.times().system
        stack.append([0.0, 0.0])
        try:
            return fn(*a, **k)
        finally:
            total, total_sys = time.process_time() - cpu, os.times().system - sys0
            inner, inner_sys = stack.pop()
            spent[label] = spent.get(label, 0.0) + total - inner
            sys_s[label] = sys_s.get(label, 0.0) + total_sys - inner_sys
            if stack:
                stack[-1][0] += total
                stack[-1][1] += total_sys
    setattr(owner, name, timed)


from mkernel import cli, runner, ir  # noqa: E402
from mkernel.builders import gemm_ar  # noqa: E402
from mkernel.sim import engine, hazardlog, backend  # noqa: E402
spent["imports"] = time.process_time() - T0
wrap(gemm_ar, "build", "build fused")
wrap(gemm_ar, "build_baseline", "build baseline")
wrap(ir.Schedule, "validate", "validate")
wrap(hazardlog.LoggedTracker, "__init__", "grids (tracker set-up)")
wrap(engine.Model, "__init__", "model set-up, other")
wrap(engine.Model, "run", "SimPy runs")
wrap(backend.SimBackend, "run", "sim backend, other")
wrap(runner, "run", "runner, other")
wrap(cli, "main", "CLI, other")
if os.environ.get("DETAIL"):
    V, CG = importlib.import_module("mkernel.validate"), importlib.import_module("mkernel.sim.cellgrid")
    SB = importlib.import_module("mkernel.schedule_builder")
    for mod, names in ((V, ("read_regions", "signal_table", "cleared", "_check_cycles", "check_outputs",
                            "_check_signals")),
                       (CG.Cells, ("_layout", "_rect", "_cells", "_once", "_own")), (CG, ("_Rows", "_pairs")),
                       (gemm_ar, ("_intra_queue", "direct_exchange", "_drain")), (SB.ScheduleBuilder, ("build",))):
        for n in names:
            if hasattr(mod, n):
                wrap(mod, n, f"  {getattr(mod, '__name__', '')}.{n}")
argv = ["run", "scenarios/paper-ib-2x8.toml", "--kernel", "gemm_ar", "--m", "32768", "--n", "32768", "--k", "2048",
        "--no-collapse", "--json", sys.argv[1] if len(sys.argv) > 1 else "/dev/null"]
with contextlib.redirect_stdout(io.StringIO()):
    cli.main(argv)
spent["total in process (after interpreter start)"] = time.process_time() - T0
print(json.dumps({k: round(v, 3) for k, v in spent.items()}))
print("gc", json.dumps({k: collections[k] for k in ("passes", "s")}))
print("sys", json.dumps({k: round(v, 3) for k, v in sys_s.items()}))
