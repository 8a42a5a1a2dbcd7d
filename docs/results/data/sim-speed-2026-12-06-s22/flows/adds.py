"""Of the row's groups, how many transfers each gets between two flushes (Python core, the committed flows.py):
printed as sorted (transfers, groups) pairs. usage (worktree root, PYTHONPATH on it): python -X mkernel-pure adds.py"""
import os, sys, collections
import mkernel.sim as s
assert s.native.state.startswith("python"), s.native.state
from mkernel.sim import flows
import mkernel.cli as cli
from mkernel import report
orig = report.progress_bar
report.progress_bar = lambda after_s=2.0: orig(after_s=1e9)
adds = collections.Counter()
hist = collections.Counter()
TP = flows.FlowNet.transfer_plan
def tp(self, plan, count=1, then=None):
    r = TP(self, plan, count, then)
    adds[plan.shape.group] += 1
    return r
flows.FlowNet.transfer_plan = tp
F = flows.FlowNet._flush
def fl(self, ev):
    for g, n in adds.items(): hist[n] += 1
    adds.clear()
    return F(self, ev)
flows.FlowNet._flush = fl
sys.stdout = open(os.devnull, "w")
cli.main(["run", "scenarios/paper-ib-2x8.toml", "--kernel", "gemm_ar", "--m", "32768", "--n", "32768", "--k", "2048", "--no-collapse"])
sys.stdout = sys.__stdout__
print(sorted(hist.items()))
