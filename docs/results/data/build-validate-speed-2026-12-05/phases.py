"""Build and validate() of the every-node row's fused schedule (2 x 8 GEMM+AR 32768^2 k2048, every node,
grouped as runner.run builds it), CPU and wall seconds, and validate()'s parts each timed alone (CPU s):
the region table and the screen, the signal keys and counts, the cycle check, output coverage.
Runs on main e19ece3 (parts: bump_keys per task and the Python graph) and on the branch (parts: the
signal table and the array graph). Run from a checkout's root (main: PYTHONPATH at a `git archive`)."""
import dataclasses
import importlib
import json
import time

import mkernel
from mkernel import builders, ir
from mkernel.coverage import check_outputs
from mkernel.members import read_regions
from mkernel.scenario import load_scenario
from mkernel.screen import cleared

V = importlib.import_module("mkernel.validate")


def clock():
    return time.process_time(), time.perf_counter()


def since(t):
    cpu, wall = clock()
    return round(cpu - t[0], 3), round(wall - t[1], 3)


sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
m, c = builders.get("gemm_ar"), sc.cluster
out = {"mkernel": mkernel.__file__}
with ir.paused_gc():  # (as the builder and validate() each run)
    t = clock()
    s = m.build(w, c, grouped=True)
    out["build (cpu, wall)"] = since(t)
    t = clock()
    s.validate(races=True)
    out["validate (cpu, wall)"] = since(t)
    out["entries, members"] = (len(s.tasks), sum(x.count for x in s.tasks))
    parts = {}
    t = clock()
    table = read_regions(s)
    parts["region table"] = since(t)[0]
    if hasattr(V, "signal_table"):  # the branch
        t = clock()
        keys = V.signal_table(s, None)
        parts["signal table"] = since(t)[0]
        t = clock()
        cleared(s, table, keys)
        parts["screen"] = since(t)[0]
        t = clock()
        V._check_signals(s, keys)
        parts["signal counts"] = since(t)[0]
    else:  # main e19ece3
        t = clock()
        cleared(s, table)
        parts["screen"] = since(t)[0]
        t = clock()
        keys = [ir.bump_keys(x) for x in s.tasks]
        parts["signal table"] = since(t)[0]  # (main: each task's bump keys)
        t = clock()
        V._check_signals(s, keys)
        parts["signal counts"] = since(t)[0]
    t = clock()
    V._check_cycles(s, keys)
    parts["cycle check"] = since(t)[0]
    t = clock()
    check_outputs(s, {b.name: b for b in s.buffers}, table)
    parts["output coverage"] = since(t)[0]
    out["validate parts, cpu"] = parts
print(json.dumps(out))
