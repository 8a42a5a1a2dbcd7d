"""The four IB curves that miss (issue 29): per point the measured and modelled time of one call, NCCL's pick
(mkernel.nccl_tuner.choose) and the model's other candidates, with LL128 and NVLS as published.toml has them
and toggled; then the ring LL's channels per size (mkernel.nccl_tuner.call_channels)."""
import dataclasses

from mkernel import nccl, nccl_tuner
from mkernel.studies import nccl_check

curves = {c.id: c for c in nccl_check.load()}
for cid in ("ib-ar-2n-nvls-on", "ib-ar-4n-curve", "ib-ag-4n", "ib-ag-32n"):
    c = curves[cid]
    print(f"\n{cid} ({c.coll}, nvls={c.nvls}, ll128={c.ll128})")
    print("nodes MiB | measured us | model us (algo/proto) err | pick with LL128 | pick NVLS off, LL128 on | candidates' busbw")
    for nodes, size, busbw in c.points:
        f = c.fabric(nodes)
        e = nccl.estimate(c.coll, size, f)
        t = size / (busbw * 1e3) * nccl.bus_factor(c.coll, f.world)
        on = dataclasses.replace(f, ll128=True)
        off = dataclasses.replace(on, nvls=False)
        cands = " ".join(f"{a}/{p}:{nccl.estimate_algo(c.coll, size, on, a, p).busbw_gb_per_s:.0f}"
                         for a, p in nccl_tuner.candidates(c.coll, on))
        print(f"{nodes} {size / (1 << 20):g} | {t:.1f} | {e.time_us:.1f} ({e.algo}/{e.proto}) {e.busbw_gb_per_s / busbw - 1:+.1%} | "
              f"{'/'.join(nccl_tuner.choose(c.coll, size, on))} | {'/'.join(nccl_tuner.choose(c.coll, size, off))} | {cands}")
f = curves["ib-ag-4n"].fabric(4)
print("\nring LL channels on 4 x 8 (16 channels):",
      {s: nccl_tuner.call_channels("ring", "LL", s << 20, f, nccl.channels(f)) for s in (1, 2, 4)})
