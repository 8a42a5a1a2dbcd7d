"""Where the row's freeing happens: process time before runner.run's return (last line of its body), after it returns, after printing, and at exit."""
import os, sys, time, atexit
import mkernel.cli as cli
from mkernel import runner, report, cli_run
orig = report.progress_bar
report.progress_bar = lambda after_s=2.0: orig(after_s=1e9)
marks = []
r0 = runner.run
def run(*a, **k):
    out = r0(*a, **k); marks.append(("runner body done", time.process_time())); return out
cli_run.runner = runner
runner.run = run
import mkernel.sim.backend as sb
b0 = sb.SimBackend.run
def brun(self, *a, **k):
    out = b0(self, *a, **k); marks.append(("sim run returned", time.process_time())); return out
sb.SimBackend.run = brun
pr0 = report.print_result
def pr(r):
    marks.append(("print start", time.process_time())); pr0(r); marks.append(("print end", time.process_time()))
report.print_result = pr
sys.stdout = open(os.devnull, "w")
cli.main(["run", "scenarios/paper-ib-2x8.toml", "--kernel", "gemm_ar", "--m", "32768", "--n", "32768", "--k", "2048", "--no-collapse"])
marks.append(("main returned", time.process_time()))
sys.stdout = sys.__stdout__
def at_exit():
    sys.stderr.write(" | ".join(f"{k} {v:.3f}" for k, v in marks) + "\n")
atexit.register(at_exit)
