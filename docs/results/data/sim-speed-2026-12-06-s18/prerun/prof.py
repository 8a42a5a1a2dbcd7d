import cProfile, pstats, dataclasses, sys
import mkernel.sim.engine as se
from mkernel import runner
from mkernel.scenario import load_scenario
class Stop(Exception): pass
def run(self): raise Stop
se.Model.run = run
sc = load_scenario('scenarios/paper-ib-2x8.toml')
sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel='gemm_ar', m=32768, n=32768, k=2048))
pr = cProfile.Profile(); pr.enable()
try: runner.run(sc, collapse=False)
except Stop: pass
pr.disable()
st = pstats.Stats(pr); st.sort_stats(sys.argv[1] if len(sys.argv) > 1 else 'tottime').print_stats(45)
