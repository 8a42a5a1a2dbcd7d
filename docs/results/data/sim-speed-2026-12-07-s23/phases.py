"""Where the every-node row's CPU goes, by phase, with the compiled core: process_time around the builder, validate()
and its parts, the hazard tracker's set-up (Cells) and end, the model's set-up (with the tracker's) and the backend's
runs (phases_min.py: the simulated runs are the backend's runs less the model's set-up and the tracker's end). The row
as the CLI's main runs it, the progress bar never shown.
usage: python phases.py (from the checkout root; PYTHONPATH=BASE to time a base copy)"""
import os, sys, time, functools, collections
t0 = time.process_time()
import mkernel.cli as cli
from mkernel import report
import mkernel.builders.gemm_ar as ga, mkernel.ir as ir, mkernel.validation as val
import mkernel.sim.backend as sb, mkernel.sim.hazardlog as hl, mkernel.sim.cellgrid as cg
t_imp = time.process_time() - t0
acc = collections.defaultdict(float); cnt = collections.Counter()
def wrap(obj, name, label=None):
    label = label or f"{getattr(obj,'__name__',obj)}.{name}"
    f = getattr(obj, name)
    @functools.wraps(f)
    def g(*a, **k):
        s = time.process_time()
        try: return f(*a, **k)
        finally: acc[label] += time.process_time() - s; cnt[label] += 1
    setattr(obj, name, g)
wrap(ga, "build"); wrap(ga, "build_baseline"); wrap(ga, "_intra_queue")
wrap(ir.Schedule, "validate")
for n in ["region_table", "signal_table", "cleared", "_check_signals", "_check_cycles", "check_outputs", "Entries", "_placed", "_homes", "_TaskRules", "_check_group"]:
    wrap(val, n)
wrap(hl.LoggedTracker, "__init__"); wrap(hl.LoggedTracker, "finish")
for n in [x for x in dir(cg.Cells) if not x.startswith("__")] + ["__init__"]:
    if callable(getattr(cg.Cells, n)) and not isinstance(cg.Cells.__dict__.get(n), staticmethod): wrap(cg.Cells, n)
wrap(sb, "Model"); wrap(sb.SimBackend, "run")
orig = report.progress_bar
report.progress_bar = lambda after_s=2.0: orig(after_s=1e9)
so = sys.stdout; sys.stdout = open(os.devnull, "w")
cli.main(["run", "scenarios/paper-ib-2x8.toml", "--kernel", "gemm_ar", "--m", "32768", "--n", "32768", "--k", "2048", "--no-collapse"])
sys.stdout = so
tot = time.process_time() - t0
print(f"import {t_imp:.3f}")
for k, v in acc.items(): print(f"{k:40s} {cnt[k]:6d} {v:.3f}")
print(f"total {tot:.3f}")
