"""verify_order.py on 30 medium builds of every op, whose tracked runs join GEMM tiles of neighbouring
entries (it counts the joins)."""
import sys
exec(open(__file__.replace("verify_spans", "verify_order")).read().split("n = bad = 0\nfor name, w, c, first")[0])
from mkernel.sim import dispatch
N = [0]
o = dispatch.Run.absorb
def absorb(self, task, n):
    N[0] += 1
    return o(self, task, n)
dispatch.Run.absorb = absorb
from mkernel.scenario import load_scenario
for kernel in ("gemm_ar", "gemm_rs", "ag_gemm", "moe_dispatch_gemm", "ring_attention"):
    for nodes, gpus, m in ((2, 4, 2048), (2, 2, 4096), (1, 8, 3072)):
        c = Cluster("t", nodes, gpus)
        w = Workload(kernel=kernel, m=m, n=m if kernel != "ring_attention" else 8, k=256 if kernel != "ring_attention" else 64)
        mod = get(kernel)
        try:
            ss = (mod.build(w, c, grouped=True), mod.build_baseline(w, c, grouped=True))
        except Exception as e:
            print("skip", kernel, e); continue
        for s in ss:
            N[0] = 0
            ok, g, calls = compare(f"{kernel} {nodes}x{gpus} {m} {s.variant}", s, c)
            print(kernel, nodes, gpus, m, s.variant, "ok" if ok else "MISMATCH", "absorbs", N[0], "calls", calls, flush=True)
