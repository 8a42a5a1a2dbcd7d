"""Hashes of every builder's fused and baseline builds (grouped and flat; full, first-node and local builds) on
five small clusters and of the 2 x 8 GEMM+AR 32768^2 build, one line each: the schedule itself (repr of every task,
buffers, launches), or with --tables what validate() reads from it (every array of signal_table, counted at the
build's homes, and of read_regions). Run with main (PYTHONPATH at a `git archive`) and with the branch, then diff.
usage: schedhash.py [--tables]"""
import dataclasses
import hashlib
import sys

import numpy as np

from mkernel import Cluster, Workload, builders, ir
from mkernel.builders import KERNELS
from mkernel.signal_table import count_homes
from mkernel.members import read_regions
from mkernel.scenario import load_scenario
from mkernel.signal_table import signal_table


def schedule(s, d):
    d.update(repr((s.kernel, s.variant, s.world, s.buffers, s.launches, s.first_nodes, s.elided, s.local_fold,
                   s.flops_per_gpu)).encode())
    for t in s.tasks:
        d.update(repr(t).encode())


def tables(s, d):
    try:
        t = signal_table(s, count_homes(s.world, s.gpus_per_node, s.first_nodes, s.local_fold))
        for f in dataclasses.fields(t):
            v = np.asarray(getattr(t, f.name))
            d.update(f.name.encode() + str(v.dtype).encode() + v.tobytes())
    except ValueError as e:
        d.update(str(e).encode())
    recs, fields, codes = read_regions(s)
    d.update(recs.tobytes() + repr(codes).encode())
    for k, v in fields.items():
        d.update(k.encode() + v.tobytes())


def digest(s) -> str:
    d = hashlib.sha256()
    (tables if "--tables" in sys.argv else schedule)(s, d)
    return d.hexdigest()[:16]


out = []
w = Workload(m=512, n=1024, k=64, chunk_tiles=2, baseline_chunk_kib=64)
for cluster in (Cluster("t", 2, 2), Cluster("t", 1, 4), Cluster("t", 2, 4, transport="efa_srd"), Cluster("t", 4, 2),
                Cluster("t", 3, 2)):
    for name in KERNELS:
        m = builders.get(name)
        for grouped in (True, False):
            for kw in ({}, {"first_nodes": 1}, {"first_nodes": 1, "local_fold": True}):
                for build in (m.build, m.build_baseline):
                    case = f"{name} {cluster.nodes}x{cluster.gpus_per_node} {grouped} {kw} {build.__name__}"
                    try:
                        with ir.paused_gc():
                            s = build(w, cluster, grouped=grouped, **kw)
                    except Exception as e:  # a shape or cluster the builder refuses: listed as such
                        out.append(f"{case}: {type(e).__name__}")
                        continue
                    out.append(f"{case}: {digest(s)}")
sc = load_scenario("scenarios/paper-ib-2x8.toml")
big = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
with ir.paused_gc():
    out.append("big fused " + digest(builders.get("gemm_ar").build(big, sc.cluster, grouped=True)))
    out.append("big base " + digest(builders.get("gemm_ar").build_baseline(big, sc.cluster, grouped=True,
                                                                         library_tasks=False)))
print("\n".join(out))
