import math
from mkernel import Cluster, NicSpec, Scenario, run, Workload
from mkernel.sim.faults import Faults
W = Workload(kernel="gemm_ar", m=1024, n=1024, k=64)
for name, nics, f in [("drop", 1, Faults(seed=1, drop=1.0, retries=2, retransmit_us=5.0)),
                      ("stall", 1, Faults(stall_rank=0, stall_at_us=5.0, stall_us=math.inf)),
                      ("nic", 1, Faults(nic_down=(2, 0)))]:
    c = Cluster("t", 2, 2, nic=NicSpec(count=nics))
    for hz in (None, False):
        try:
            run(Scenario("t", c, W), seed=5, faults=f, collapse=False, hazards=hz)
            print(name, hz, "no error")
        except Exception as e:
            print(name, hz, type(e).__name__, str(e)[:600].replace("\n", " | "))
