"""Phase CPU times of one mkernel run (monkeypatched limits.step)."""
import sys, time
from mkernel import limits, cli
marks = []
orig = limits.step
def step(text):
    marks.append((time.process_time(), text[:60]))
    orig(text)
limits.step = step
import mkernel.runner as runner
runner.limits.step = step
t0 = time.process_time()
try:
    cli.main(sys.argv[1:])
except SystemExit:
    pass
marks.append((time.process_time(), "end"))
prev = t0
for t, text in marks:
    print(f"{t - prev:7.2f}  -> {text}", file=sys.stderr); prev = t
