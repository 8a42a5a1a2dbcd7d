"""The every-node 2 x 8 GEMM+AR 32768^2 k2048 run without hazard tracking (runner.run(collapse=False,
hazards=False), as a sweep runs a point it does not collapse): CPU and wall seconds, simulated times.
Run from a checkout's root, with that checkout's venv."""
import dataclasses
import json
import sys
import time

from mkernel import runner
from mkernel.scenario import load_scenario

sc = load_scenario("scenarios/paper-ib-2x8.toml")
sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048))
cpu, wall = time.process_time(), time.perf_counter()
result, _ = runner.run(sc, collapse=False, hazards=False)
print(json.dumps({"row": "full, hazards=False", "cpu_s": round(time.process_time() - cpu, 2),
                  "wall_s": round(time.perf_counter() - wall, 2), "fused_us": result["time_s"] * 1e6,
                  "baseline_us": result["baseline"]["time_s"] * 1e6, "collapsed": result["collapsed"]}))
sys.stdout.flush()
