"""process_time of the every-node row's tracked fused run (Model.run alone), in the tree on sys.path."""
import time, dataclasses, sys
import mkernel.sim.engine as se
from mkernel import runner
from mkernel.scenario import load_scenario
m = int(sys.argv[1]) if len(sys.argv) > 1 else 32768
f = se.Model.run; T = []
def w(self):
    if self.s.variant != 'fused': return f(self)
    t = time.process_time(); r = f(self); T.append(time.process_time() - t); T.append(self.env.events); return r
se.Model.run = w
sc = load_scenario('scenarios/paper-ib-2x8.toml')
sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel='gemm_ar', m=m, n=m, k=2048))
runner.run(sc, collapse=False)
print(f"{se.__file__.split('/')[2]} run {T[0]:.3f} s events {T[1]}")
