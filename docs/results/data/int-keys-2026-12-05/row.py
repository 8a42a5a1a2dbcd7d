import dataclasses
from mkernel import runner
from mkernel.scenario import load_scenario
sc = load_scenario('paper-ib-2x8')
sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel='gemm_ar', m=32768, n=32768, k=2048))
runner.run(sc, collapse=False, hazards=None)
