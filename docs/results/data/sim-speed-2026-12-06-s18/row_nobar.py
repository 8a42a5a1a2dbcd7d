"""The every-node row through mkernel.cli.main (as `python -m mkernel run ...`), with the progress bar as
shipped (default), never shown (never: under callgrind the run outlasts the bar's 2 s, and its refresh would
add load-dependent instructions) or started at the first progress call (now: what a bar costs, output to /dev/null).
usage: row_nobar.py default|never|now [entry]; with entry, the run ends as the
`mkernel` command's process does (mkernel.cli.entry: the output flushed, then os._exit, no interpreter shutdown)
and prints nothing more."""
import os, sys, time
t0 = time.process_time()
import mkernel.cli as cli
from mkernel import report
if sys.argv[1] in ("never", "now"):
    orig, after = report.progress_bar, 1e9 if sys.argv[1] == "never" else 0.0
    report.progress_bar = lambda after_s=2.0: orig(after_s=after)
sys.stdout = open(os.devnull, "w")
row = ["run", "scenarios/paper-ib-2x8.toml", "--kernel", "gemm_ar", "--m", "32768", "--n", "32768", "--k", "2048", "--no-collapse"]
if sys.argv[2:] == ["entry"]:
    sys.argv[1:] = row
    cli.entry()
cli.main(row)
sys.stdout = sys.__stdout__
print(sys.argv[1], f"{time.process_time() - t0:.3f}", "rich.progress" in sys.modules)
