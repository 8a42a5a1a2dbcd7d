"""The every-node row run in-process, stopped before the fused build (``begin``) or after a phase, for
callgrind Ir by difference: the sim-speed thirteenth section's stop.py with a ``begin`` stop, so the
build's Ir is its own (stop ``build`` less stop ``begin``: imports and the scenario's load left out).
usage: python stop.py begin|build|validate|init|run|all"""
import sys, os, dataclasses
import mkernel.builders.gemm_ar as g, mkernel.ir as ir, mkernel.sim.engine as se
from mkernel import runner
from mkernel.scenario import load_scenario
stop = sys.argv[1]
def after(obj, name, label):
    f = getattr(obj, name)
    def w(*a, **k):
        if stop == 'begin' and label == 'build': os._exit(0)
        r = f(*a, **k)
        if label == stop: os._exit(0)
        return r
    setattr(obj, name, w)
after(g, 'build', 'build'); after(ir.Schedule, 'validate', 'validate'); after(se.Model, '__init__', 'init'); after(se.Model, 'run', 'run')
sc = load_scenario('scenarios/paper-ib-2x8.toml')
sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel='gemm_ar', m=32768, n=32768, k=2048))
runner.run(sc, collapse=False)
