"""CPU seconds per phase of one `mkernel run` (in process: the imports, then each limits.step mark of
runner.run). Usage: python phases.py SCENARIO [key=value ...] [collapse=0|1]
(workload keys as in the scenario; nodes=N sets the cluster's nodes)."""
import dataclasses
import sys
import time

t0 = time.process_time()
from mkernel import limits, runner  # noqa: E402
from mkernel.scenario import load_scenario  # noqa: E402
import mkernel.sim  # noqa: E402,F401

imports = time.process_time() - t0
marks = []
step = limits.step
limits.step = lambda text: (marks.append((time.process_time(), text[:60])), step(text))
sc = load_scenario(sys.argv[1])
work, cluster, collapse = {}, {}, None
for kv in sys.argv[2:]:
    k, v = kv.split("=")
    v = int(v) if v.lstrip("-").isdigit() else v
    if k == "collapse":
        collapse = bool(v)
    else:
        (cluster if k == "nodes" else work)[k] = v
sc = dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, **cluster),
                         workload=dataclasses.replace(sc.workload, **work))
marks.append((time.process_time(), "start"))
result, _ = runner.run(sc, collapse=collapse)
marks.append((time.process_time(), "end"))
print(f"{imports:7.3f}  imports (mkernel, the simulator)")
for (a, name), (b, _) in zip(marks, marks[1:]):
    print(f"{b - a:7.3f}  {name}")
print(f"{marks[-1][0] - marks[0][0]:7.3f}  runner.run; fused {result['time_s'] * 1e6:.2f} us, baseline "
      f"{result['baseline']['time_s'] * 1e6:.2f} us, {result['events']} events, collapsed {result['collapsed']}")
