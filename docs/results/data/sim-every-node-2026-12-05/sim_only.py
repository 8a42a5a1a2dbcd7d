"""The simulator's share of the every-node 2 x 8 GEMM+AR 32768^2 k2048 run: builds the two schedules
once (runner.build(grouped=True, timing=True), as a sim run builds them), then times
SimBackend.run(collapse=False) of each, with hazard tracking (hazards=None, the default) and
without (hazards=False), twice each, alternating; prints the CPU seconds of each and the simulated
times. Run from a checkout's root, with that checkout's venv."""
import dataclasses
import json
import time

from mkernel import runner
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend

sc = load_scenario("scenarios/paper-ib-2x8.toml")
sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048))
schedules = runner.build(sc, grouped=True, timing=True)
rows = []
for repeat in (1, 2):
    for hazards in (None, False):
        for s in schedules:
            cpu = time.process_time()
            stats = SimBackend().run(s, sc.cluster, collapse=False, hazards=hazards)
            rows.append({"variant": s.variant, "hazards": hazards, "repeat": repeat,
                         "cpu_s": round(time.process_time() - cpu, 2), "time_us": stats.time_s * 1e6,
                         "events": stats.events, "hazards_found": len(stats.hazards)})
            print(json.dumps(rows[-1]), flush=True)
