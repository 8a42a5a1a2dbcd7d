"""Every 2-node p5 point of the published curves: measured, and the model's error at three EFA hop shares
(0.5: the committed, 37.5 us on p5; 1/3: 25 us; 0.2: 15 us). Run from the repository root."""
from mkernel import nccl
from mkernel.studies import nccl_check as nc

curves = {c.id: c for c in nc.load()}
shares = (0.5, 1 / 3, 0.2)
print("curve | MiB | measured GB/s | measured us | " + " | ".join(f"share {s:.2f} ({s * 75:.1f} us)" for s in shares))
for cid in ("p5-ag-scale", "p5-ar-scale", "p5-ar-2n"):
    c = curves[cid]
    for nodes, nb, bw in c.points:
        if nodes != 2:
            continue
        cells = []
        for s in shares:
            e = nccl.estimate(c.coll, nb, c.fabric(nodes, nccl.replace(nccl.TERMS["efa"], net_hop_share=s)))
            cells.append(f"{e.busbw_gb_per_s / bw - 1:+6.1%} {e.algo}/{e.proto}")
        us = nb / (bw / nccl.bus_factor(c.coll, 16)) / 1e3
        print(f"{cid} | {nb / 2**20:.0f} | {bw:.1f} | {us:.0f} | " + " | ".join(cells))
