"""What step 2's integer keys would cost to get in the simulator: validate's SignalTable (every member's bump and
wait keys, numbered densely) built again for the every-node row's fused schedule, CPU s; and the per-key costs of
reading and bumping one counter held in a dict by (rank, name, index), a dict by int, a list and a numpy int64 array
(timeit, 1e6 ops, ns each). usage: keyspace_cost.py"""
import dataclasses
import time
import timeit

import numpy as np

from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.signal_table import signal_table

sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
with ir.paused_gc():
    fused = builders.get("gemm_ar").build(w, sc.cluster, grouped=True)
for _ in range(2):
    t = time.process_time()
    table = signal_table(fused)
    print(f"signal_table(fused): {time.process_time() - t:.2f} s CPU, {table.keys} keys, "
          f"{len(table.bump_key)} bump records, {len(table.wait_key)} wait records")
n = 1_000_000
tup = {(r, "contrib", i): 0 for r in range(16) for i in range(1000)}
ints = {i: 0 for i in range(16000)}
lst = [0] * 16000
arr = np.zeros(16000, np.int64)
k, j = (3, "contrib", 500), 3500
for what, stmt in (("tuple dict get", "tup.get(k, 0)"), ("int dict get", "ints.get(j, 0)"), ("list read", "lst[j]"),
                   ("numpy read", "arr[j]"), ("tuple dict bump", "tup[k] = tup.get(k, 0) + 1"),
                   ("int dict bump", "ints[j] = ints.get(j, 0) + 1"), ("list bump", "lst[j] += 1"),
                   ("numpy bump", "arr[j] += 1")):
    s = min(timeit.repeat(stmt, globals=globals(), number=n, repeat=3))
    print(f"{what}: {s / n * 1e9:.0f} ns")
