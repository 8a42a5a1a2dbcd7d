"""Load the pickled log, make the tracker, and (with 'finish') decide the verdict: the difference of the
two runs' instructions is LoggedTracker.finish's. usage: fin_ir.py LOG.pkl [finish]"""
import pickle, sys, gc
from mkernel import ir
from mkernel.sim import hazardlog as H
gc.disable()
with open(sys.argv[1], "rb") as f:
    s, log, ends = pickle.load(f)
table = s.validate()
t = H.LoggedTracker(s, table)
t._log, t._ends = log, ends
if len(sys.argv) > 2:
    t.finish()
    assert t.hazards == []
