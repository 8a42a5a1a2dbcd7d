"""The CPU an invisible progress bar cost the every-node row: the row through the CLI's main with its output to
/dev/null (not a terminal), the bar started from the first progress call (AFTER_S = 0) or never (1e9); prints
AFTER_S and the process_time. Run on the base, where a bar started whatever the output; on the final none starts
where the output is not a terminal. usage: bar_cost.py AFTER_S"""
import os
import sys
import time

t0 = time.process_time()
import mkernel.cli as cli  # noqa: E402
from mkernel import report  # noqa: E402

after = float(sys.argv[1])
shipped = report.progress_bar
report.progress_bar = lambda after_s=2.0: shipped(after_s=after)
sys.stdout = open(os.devnull, "w")
cli.main(["run", "scenarios/paper-ib-2x8.toml", "--kernel", "gemm_ar", "--m", "32768", "--n", "32768", "--k", "2048",
          "--no-collapse"])
sys.stdout = sys.__stdout__
print(after, f"{time.process_time() - t0:.3f}", "rich.progress" in sys.modules)
