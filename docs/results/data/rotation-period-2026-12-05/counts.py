"""The every-node row's grouped fused build: its entries per role and op and its GEMM group sizes, and the sha256 of
repr() of the build as built and expanded (ir.expand). Run on main (PYTHONPATH at a checkout of it) and on this
branch: the expansions must hash alike. usage: python counts.py"""
import collections
import dataclasses
import hashlib

from mkernel.builders import gemm_ar
from mkernel.ir import expand, paused_gc
from mkernel.scenario import load_scenario

sc = load_scenario("paper-ib-2x8")
with paused_gc():
    s = gemm_ar.build(dataclasses.replace(sc.workload, m=32768, n=32768, k=2048), sc.cluster, grouped=True)
    e = expand(s)
roles = collections.Counter(f"{t.role.value}/{t.op.value}" for t in s.tasks)
gemm = collections.Counter((t.rank % s.gpus_per_node, t.count) for t in s.tasks if t.op.value == "gemm")
print(f"entries {len(s.tasks)} members {len(e.tasks)}; per role: {dict(sorted(roles.items()))}")
print(f"GEMM entries per (local rank, members): {dict(sorted(gemm.items()))}")
print(f"sha256 built {hashlib.sha256(repr(s).encode()).hexdigest()}")
print(f"sha256 expanded {hashlib.sha256(repr(e).encode()).hexdigest()}")
