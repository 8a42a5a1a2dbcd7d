"""alltoall terms fitted on some node counts of p5-a2a-scale and judged on the others, with and without the
per-chunk cost (a grid over the four a2a terms; the ring terms as committed)."""
import dataclasses
import numpy as np
from mkernel import nccl
from mkernel.studies import nccl_check as nc
c = [c for c in nc.load() if c.id == "p5-a2a-scale"][0]
base = nccl.TERMS["efa"]

def pts(nodes):
    return [(c, n, b, bw) for n, b, bw in c.points if b >= nc.MIN_BYTES and n in nodes]

def errs(t, nodes):
    out = []
    for n, b, bw in c.points:
        if n in nodes:
            e = nccl.estimate("alltoall", b, c.fabric(n, t))
            out.append(e.busbw_gb_per_s / bw - 1)
    return np.mean(np.abs(out)), max(out, key=abs)

for fit_nodes, judge in (((2, 4, 8), (16, 32)), ((8, 16, 32), (2, 4)), ((2, 8, 32), (4, 16))):
    for label, msgs in (("no chunk cost", [0.0]), ("chunk cost", [0.5, 1, 1.5, 2, 2.5, 3, 4])):
        best = None
        for eff in np.arange(0.70, 1.001, 0.01):
            for msg in msgs:
                for b in range(0, 401, 25):
                    for peer in [0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 5, 6, 8]:
                        t = dataclasses.replace(base, a2a_efficiency=eff, a2a_message_us=msg, a2a_base_us=b, a2a_peer_us=peer)
                        l = nc.loss(pts(fit_nodes), "efa", t)
                        if best is None or l < best[0]:
                            best = (l, t)
        t = best[1]
        fm, fw = errs(t, fit_nodes); jm, jw = errs(t, judge)
        print(f"fit {fit_nodes} judge {judge} {label}: eff {t.a2a_efficiency:.2f} base {t.a2a_base_us} peer {t.a2a_peer_us} "
              f"msg {t.a2a_message_us} | fitted {fm:.1%} / {fw:+.1%} | held out {jm:.1%} / {jw:+.1%}", flush=True)
