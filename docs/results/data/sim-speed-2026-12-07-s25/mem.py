"""Minor faults and RSS by phase of the every-node row."""
import os, sys, time, functools, collections, resource
def flt(): return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def rss(): return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
f0 = flt()
import mkernel.cli as cli
from mkernel import report
import mkernel.builders.gemm_ar as ga, mkernel.ir as ir, mkernel.validation as val
import mkernel.sim.backend as sb, mkernel.sim.hazardlog as hl, mkernel.sim.cellgrid as cg, mkernel.sim.engine as en
print(f"import faults {flt()-f0} rss {rss():.0f}")
acc = collections.defaultdict(int); cnt = collections.Counter(); order = []
def wrap(obj, name, label=None):
    label = label or f"{getattr(obj,'__name__',obj)}.{name}"
    f = getattr(obj, name)
    @functools.wraps(f)
    def g(*a, **k):
        s = flt(); t = time.process_time()
        try: return f(*a, **k)
        finally:
            acc[label] += flt() - s; cnt[label] += 1
            order.append((label, flt() - s, rss(), time.process_time() - t))
    setattr(obj, name, g)
wrap(ga, "build"); wrap(ga, "build_baseline")
wrap(ir.Schedule, "validate")
for n in ["region_table", "signal_table", "cleared", "_check_cycles", "check_outputs"]:
    wrap(val, n)
wrap(hl.LoggedTracker, "__init__"); wrap(hl.LoggedTracker, "finish")
wrap(sb, "Model"); wrap(sb.SimBackend, "run"); wrap(en.Model, "run"); wrap(en.Model, "close")
orig = report.progress_bar
report.progress_bar = lambda after_s=2.0: orig(after_s=1e9)
so = sys.stdout; sys.stdout = open(os.devnull, "w")
try:
    cli.main(["run", "scenarios/paper-ib-2x8.toml", "--kernel", "gemm_ar", "--m", "32768", "--n", "32768", "--k", "2048", "--no-collapse"])
except SystemExit: pass
sys.stdout = so
for lab, d, r, t in order: print(f"{lab:40s} faults {d:7d} rss-after {r:6.0f} MB  cpu {t:.3f}")
print(f"total faults {flt()-f0} rss {rss():.0f} maxrss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024:.0f} MB")
