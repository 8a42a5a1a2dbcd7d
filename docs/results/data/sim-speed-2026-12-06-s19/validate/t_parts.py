"""min-of-N process time of validate's parts on the row's fused schedule (this tree vs another: run twice)."""
import sys, time, gc; sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from build import fused as s
from mkernel import validation as V
from mkernel.members import Entries, region_table
from mkernel.signal_table import signal_table
from mkernel.screen import cleared
from mkernel.coverage import check_outputs
N = int(sys.argv[1]) if len(sys.argv) > 1 else 5
def t(label, f):
    best = 1e9
    for _ in range(N):
        gc.disable(); a = time.process_time(); r = f(); d = time.process_time() - a; gc.enable(); best = min(best, d)
    print(f"{label:14s} {best*1000:7.1f} ms"); return r
home = V._homes(s); e = Entries(s.tasks)
tab = t("region_table", lambda: region_table(s, e))
keys = t("signal_table", lambda: signal_table(s, home, e))
t("cleared", lambda: cleared(s, tab, keys, e))
t("_check_cycles", lambda: V._check_cycles(s, keys, V._placed(s)))
bufs = {b.name: b for b in s.buffers}
t("check_outputs", lambda: check_outputs(s, bufs, tab, keys.count))
t("validate", lambda: V.validate(s))
