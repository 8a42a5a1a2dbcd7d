"""Hash of every builder's fused and baseline builds (grouped and flat, local/first-node variants) on small
clusters, and of the 2 x 8 GEMM+AR 32768^2 build: repr of every task, buffers, launches. usage: schedhash.py"""
import dataclasses, hashlib, sys
from mkernel import Cluster, Workload, builders, ir
from mkernel.builders import KERNELS
from mkernel.scenario import load_scenario
def h(s):
    d = hashlib.sha256()
    d.update(repr((s.kernel, s.variant, s.world, s.buffers, s.launches, s.first_nodes, s.elided, s.local_fold, s.flops_per_gpu)).encode())
    for t in s.tasks:
        d.update(repr(t).encode())
    return d.hexdigest()[:16]
out = []
w = Workload(m=512, n=1024, k=64, chunk_tiles=2, baseline_chunk_kib=64)
for cluster in (Cluster("t", 2, 2), Cluster("t", 1, 4), Cluster("t", 2, 4, transport="efa_srd"), Cluster("t", 4, 2), Cluster("t", 3, 2)):
    for name in KERNELS:
        m = builders.get(name)
        for grouped in (True, False):
            for kw in ({}, {"first_nodes": 1}, {"first_nodes": 1, "local_fold": True}):
                for build in (m.build, m.build_baseline):
                    try:
                        with ir.paused_gc():
                            s = build(w, cluster, grouped=grouped, **kw)
                    except Exception as e:
                        out.append(f"{name} {cluster.nodes}x{cluster.gpus_per_node} {grouped} {kw} {build.__name__}: {type(e).__name__}")
                        continue
                    out.append(f"{name} {cluster.nodes}x{cluster.gpus_per_node} {grouped} {kw} {build.__name__}: {h(s)}")
sc = load_scenario("scenarios/paper-ib-2x8.toml")
big = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
with ir.paused_gc():
    out.append("big fused " + h(builders.get("gemm_ar").build(big, sc.cluster, grouped=True)))
    out.append("big base " + h(builders.get("gemm_ar").build_baseline(big, sc.cluster, grouped=True, library_tasks=False)))
print("\n".join(out))
