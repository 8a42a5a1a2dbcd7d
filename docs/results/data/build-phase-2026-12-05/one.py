"""One build of the every-node row's fused schedule in a fresh process: its process time (the first
build of the process, as a run makes it: the tile grid is made inside it too)."""
import dataclasses, sys, time
from mkernel.scenario import load_scenario
import mkernel.builders.gemm_ar as g
sc = load_scenario('scenarios/paper-ib-2x8.toml')
w = dataclasses.replace(sc.workload, m=32768, n=32768, k=2048)
t = time.process_time(); s = g.build(w, sc.cluster, grouped=True); dt = time.process_time() - t
print(f"{dt:.4f} {len(s.tasks)}")
