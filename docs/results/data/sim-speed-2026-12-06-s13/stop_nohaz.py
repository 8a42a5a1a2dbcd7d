"""The every-node row run in-process, stopped after a phase, for callgrind Ir by difference (stop_nohaz.py: the same with hazards=False).
usage: python stop.py build|validate|init|run|all"""
import sys, os, dataclasses
import mkernel.builders.gemm_ar as g, mkernel.ir as ir, mkernel.sim.engine as se
from mkernel import runner
from mkernel.scenario import load_scenario
stop = sys.argv[1]
def after(obj, name, label):
    f = getattr(obj, name)
    def w(*a, **k):
        r = f(*a, **k)
        if label == stop: os._exit(0)
        return r
    setattr(obj, name, w)
after(g, 'build', 'build'); after(ir.Schedule, 'validate', 'validate'); after(se.Model, '__init__', 'init'); after(se.Model, 'run', 'run')
sc = load_scenario('scenarios/paper-ib-2x8.toml')
sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel='gemm_ar', m=32768, n=32768, k=2048))
runner.run(sc, collapse=False, hazards=False)
