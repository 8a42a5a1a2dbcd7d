"""The fused builds of the other ops on paper-ib-2x8 (grouped, every node), one fresh process per run: each op's
process time and entries. usage (from a checkout root): python others.py"""
import dataclasses
import time

from mkernel import builders
from mkernel.scenario import load_scenario

sc = load_scenario("scenarios/paper-ib-2x8.toml")
SHAPES = {"gemm_rs": dict(m=32768, n=32768, k=2048), "ag_gemm": dict(m=32768, n=32768, k=2048),
          "ring_attention": dict(m=32768, n=16, k=128), "moe_dispatch_gemm": dict(m=16384, n=4096, k=2048, experts=64)}
out = []
for kernel, dims in SHAPES.items():
    w = dataclasses.replace(sc.workload, kernel=kernel, **dims)
    t = time.process_time()
    s = builders.get(kernel).build(w, sc.cluster, grouped=True)
    out.append(f"{kernel} {time.process_time() - t:.3f} {len(s.tasks)}")
print(" | ".join(out))
