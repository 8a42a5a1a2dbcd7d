"""The model against the 4-node IB curves of scenarios/nccl/published.toml (ib-ag-4n, ib-ar-4n-curve),
per point, with LL128 as the run had it (off) and on, NVLS on and off; then the IB Simple ring's
network hop latency and slicing varied (experiments only: nothing here is committed to the model).

    python docs/results/data/nccl-6-2026-12-05/ib_4n.py > docs/results/data/nccl-6-2026-12-05/ib-4n.txt
"""
import dataclasses

from mkernel import nccl, nccl_tuner
from mkernel.studies import nccl_check

curves = {c.id: c for c in nccl_check.load()}
for cid in ("ib-ag-4n", "ib-ar-4n-curve"):
    c = curves[cid]
    for ll128 in (False, True):
        for nvls in ((True, False) if c.coll == "all_reduce" else (True,)):
            variant = dataclasses.replace(c, ll128=ll128, nvls=nvls)
            print(f"{cid} ll128={ll128} nvls={nvls}")
            for p in nccl_check.point_errors(variant):
                print(f"  {p.nbytes >> 20:5d} MiB measured {p.measured:6.1f} model {p.predicted:6.1f} "
                      f"{p.error:+6.1%} {p.algo}/{p.proto}")

print("\nIB Simple ring, ib-ag-4n from 4 MiB (Simple there): network hop latency and slices per step varied")
c = curves["ib-ag-4n"]
meas = [(b, v) for _, b, v in c.points if b >= 4 << 20]
orig = nccl._ring_slices


def fixed(per):
    def slices(cc, proto, f):
        loops, p, depth = orig(cc, proto, f)
        return (loops, per, depth) if proto == "Simple" else (loops, p, depth)
    return slices


for name, fn in (("model (1 slice below 64 KiB a channel, else 2)", orig), ("always 2 slices", fixed(2)),
                 ("always 1 slice", fixed(1))):
    nccl._ring_slices = fn
    for hop in (5.0, 8.0, 11.0, 14.0, 20.0):
        f = nccl.with_terms(c.fabric(4), net_hop_us=hop - nccl_tuner.NET_HOP_US["ring"][2])
        errs = [nccl.estimate_algo("all_gather", b, f, "ring", "Simple").busbw_gb_per_s / v - 1 for b, v in meas]
        row = " ".join(f"{b >> 20}:{e:+.0%}" for (b, _), e in zip(meas, errs))
        print(f"  {name:48s} hop {hop:4.0f} us  {row}  mean {sum(map(abs, errs)) / len(errs):.1%}")
nccl._ring_slices = orig

print("\nib-ag-4n measured per ring step (31 steps), c = a channel's share of a rank's chunk (16 channels)")
for b, v in meas:
    t = b * 31 / 32 / (v * 1e3)
    c_bytes = b / 32 / 16
    print(f"  {b >> 20:5d} MiB  c {c_bytes / 1024:6.0f} KiB  step {t / 31:6.1f} us  "
          f"step - c at 20.2 GB/s {t / 31 - c_bytes / 20.2e3:5.1f} us")
