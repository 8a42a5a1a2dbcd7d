"""Pickle the row's fused build (2 x 8 GEMM+AR 32768^2, paper-ib-2x8.toml) for cg.py. usage: mkpk.py PICKLE"""
import dataclasses
import pickle
import sys

from mkernel import builders, ir
from mkernel.scenario import load_scenario

sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
with ir.paused_gc():
    s = builders.get("gemm_ar").build(w, sc.cluster, grouped=True)
    open(sys.argv[1], "wb").write(pickle.dumps(s, protocol=5))
