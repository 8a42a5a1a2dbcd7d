"""Where the every-node 2 x 8 GEMM+AR 32768^2 k2048 run's CPU goes (runner.run(collapse=False), hazards
tracked): building, Schedule.validate (with the race proof), and the simulator, timed by wrapping
them. Run from a checkout's root, with that checkout's venv."""
import collections
import dataclasses
import json
import time

from mkernel import builders, ir, runner
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend

spent: dict = collections.Counter()


def timed(name, fn):
    def wrapper(*a, **kw):
        cpu = time.process_time()
        try:
            return fn(*a, **kw)
        finally:
            spent[name] += time.process_time() - cpu
    return wrapper


module = builders.get("gemm_ar")
module.build, module.build_baseline = timed("build fused", module.build), timed("build baseline", module.build_baseline)
ir.Schedule.validate = timed("validate", ir.Schedule.validate)
SimBackend.run = timed("simulate", SimBackend.run)
sc = load_scenario("scenarios/paper-ib-2x8.toml")
sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048))
cpu = time.process_time()
runner.run(sc, collapse=False)
spent["total"] = time.process_time() - cpu
print(json.dumps({k: round(v, 2) for k, v in spent.items()}))
