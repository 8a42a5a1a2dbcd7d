"""min-of-N process time of validate's parts and the tracker's set-up on the every-node row."""
import time, dataclasses, sys, gc
import numpy as np
from mkernel import builders, ir, validation as V
from mkernel.members import Entries, region_table
from mkernel.signal_table import signal_table
from mkernel.screen import cleared
from mkernel.coverage import check_outputs
from mkernel.scenario import load_scenario
from mkernel.sim import cellgrid, hazardlog
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
mk, c = builders.get("gemm_ar"), sc.cluster
with ir.paused_gc():
    fused = mk.build(w, c, grouped=True)
    base = mk.build_baseline(w, c, grouped=True)
N = int(sys.argv[1]) if len(sys.argv) > 1 else 5
def t(label, f):
    best = 1e9
    for _ in range(N):
        gc.disable(); s = time.process_time(); r = f(); d = time.process_time() - s; gc.enable()
        best = min(best, d)
    print(f"{label:28s} {best*1000:8.1f} ms"); return r
for name, s in (("fused", fused), ("base", base)):
    print("==", name, len(s.tasks))
    e = t("Entries", lambda: Entries(s.tasks))
    home = V._homes(s)
    tab = t("region_table", lambda: region_table(s, Entries(s.tasks)))
    keys = t("signal_table", lambda: signal_table(s, home, Entries(s.tasks)))
    t("cleared", lambda: cleared(s, tab, keys, Entries(s.tasks)))
    placed = t("_placed", lambda: V._placed(s))
    t("_check_signals", lambda: V._check_signals(s, keys, placed[1]))
    t("_check_cycles", lambda: V._check_cycles(s, keys, placed))
    bufs = {b.name: b for b in s.buffers}
    t("check_outputs", lambda: check_outputs(s, bufs, tab, keys.count))
    t("validate", lambda: V.validate(s))
    if name == "fused":
        t("Cells", lambda: cellgrid.Cells(s, tab))
        t("LoggedTracker", lambda: hazardlog.LoggedTracker(s, tab))
