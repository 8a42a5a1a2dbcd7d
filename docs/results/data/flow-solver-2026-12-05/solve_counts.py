import numpy as np
import mkernel.sim.maxmin as M
import mkernel.sim.flows as F
from mkernel.studies import study, sweep
p = [p for p in study.grid() if p.key == "scaleout/gb200-nvl72-800g-2x72/moe_dispatch_gemm/128"][0]
out = []
orig_res = M.resolve
def res(links, touched, prune=True):
    moved, rates = orig_res(links, touched, prune)
    full = M.component(links)
    out.append((prune, len(full), len(moved), sum(1 for f in moved if rates[f] != f.rate)))
    return moved, rates
F.resolve = res
sweep.run_point(p)
a = np.array(out, dtype=float)
print("solves", len(a), "incremental", int(a[:,0].sum()))
for i, n in ((1, "component"), (2, "re-filled"), (3, "rate changed")):
    print(n, "sum %d mean %.1f median %d p90 %d" % (a[:,i].sum(), a[:,i].mean(), np.median(a[:,i]), np.percentile(a[:,i],90)))
