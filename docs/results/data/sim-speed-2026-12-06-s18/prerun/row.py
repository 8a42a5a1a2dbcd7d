"""The every-node row's scenario and fused build, shared by this folder's timing scripts (run them from a
checkout's root with that tree on PYTHONPATH: this folder is put on sys.path as the script's own)."""
import dataclasses

from mkernel import builders, ir
from mkernel.scenario import load_scenario

sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
mk, c = builders.get("gemm_ar"), sc.cluster
with ir.paused_gc():
    fused = mk.build(w, c, grouped=True)
