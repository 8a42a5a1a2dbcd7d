"""Build and validate the ring attention bench row's fused schedule (paper-efa-2x8, m 12288, n 64, k 128): for callgrind Ir of the two together."""
import dataclasses
from mkernel import builders, ir
from mkernel.scenario import load_scenario
sc = load_scenario("scenarios/paper-efa-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="ring_attention", m=12288, n=64, k=128)
with ir.paused_gc():
    fused = builders.get("ring_attention").build(w, sc.cluster, grouped=True)
    fused.validate(races=False)
