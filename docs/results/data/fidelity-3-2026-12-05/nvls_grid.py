"""Tried, not kept (docs/results/2026-12-05-fidelity-3.md): NVLS's chunk steps. Needs nvls_step_tried.diff applied
to mkernel/nccl.py (git apply), then: python THIS. A grid of the NVLink terms (NVLS latency, efficiency, per-step
cost) on p5-ar-1n, and that curve's errors at the best cell."""
import dataclasses, itertools
from mkernel import nccl
from mkernel.studies import nccl_check as nc
curves = nc.load()
net = "nvlink"
pts = [(c, n, b, bw) for c in curves if c.fit for n, b, bw in c.points if b >= nc.MIN_BYTES and c.network(n) == net]
base = nccl.TERMS[net]
res = []
for hop in range(5, 50, 5):
    for eff in [0.62 + 0.01*i for i in range(26)]:
        for step in [0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12]:
            t = dataclasses.replace(base, nvls_hop_us=hop, nvls_efficiency=eff, nvls_step_us=step)
            res.append((nc.loss(pts, net, t), hop, eff, step))
res.sort()
for r in res[:8]: print(r)
l0 = nc.loss(pts, net, base); print("base", l0)
best = res[0]
t = dataclasses.replace(base, nvls_hop_us=best[1], nvls_efficiency=best[2], nvls_step_us=best[3])
c = [c for c in curves if c.id == "p5-ar-1n"][0]
for p in nc.point_errors(c, {"nvlink": t}):
    print(f"{p.nbytes/2**20:8g} {p.error:+.1%} {p.algo}")
