"""Build the row's fused schedule, then run the named parts of validate between two cg_toggle calls (callgrind
--collect-atstart=no counts only those). Parts: validate entries region signal cleared cycles outputs."""
import sys, ctypes; sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from build import fused as s
from mkernel import validation as V, ir
from mkernel.members import Entries, region_table
from mkernel.signal_table import signal_table
from mkernel.screen import cleared
from mkernel.coverage import check_outputs
lib = ctypes.CDLL(__import__("os").path.join(__import__("os").path.dirname(__import__("os").path.abspath(__file__)), "cgrun.so"))
def inside(f):
    lib.cg_toggle()
    try:
        return f()
    finally:
        lib.cg_toggle()
home = V._homes(s)
bufs = {b.name: b for b in s.buffers}
for part in sys.argv[1:]:
    with ir.paused_gc():
        if part == "validate":
            inside(lambda: V.validate(s))
        elif part == "entries":
            inside(lambda: Entries(s.tasks))
        elif part == "region":
            e = Entries(s.tasks); inside(lambda: region_table(s, e))
        elif part == "signal":
            e = Entries(s.tasks); inside(lambda: signal_table(s, home, e))
        elif part in ("_bumps", "_waits", "_dense"):  # one function of signal_table alone
            import mkernel.signal_table as ST
            f = getattr(ST, part)
            def wrapped(*a, _f=f):
                return inside(lambda: _f(*a))
            setattr(ST, part, wrapped)
            e = Entries(s.tasks); signal_table(s, home, e)
            setattr(ST, part, f)
        elif part == "cleared":
            e = Entries(s.tasks); tab = region_table(s, e); keys = signal_table(s, home, e)
            inside(lambda: cleared(s, tab, keys, e))
        elif part == "cycles":
            e = Entries(s.tasks); keys = signal_table(s, home, e)
            placed = V._placed(s)
            inside(lambda: V._check_cycles(s, keys, placed))
        elif part == "outputs":
            e = Entries(s.tasks); tab = region_table(s, e); keys = signal_table(s, home, e)
            inside(lambda: check_outputs(s, bufs, tab, keys.count))
