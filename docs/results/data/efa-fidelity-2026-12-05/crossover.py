# Run from the repository root: python docs/results/data/efa-fidelity-2026-12-05/crossover.py
"""Where the model's ring Simple overtakes ring LL128 on p5en (all_gather = reduce_scatter in the model),
against aws-ofi-nccl's p5en region boundary (LL128 -> Simple) at HEAD (src/tuner/nccl_ofi_regions.cpp)."""
import math
from mkernel import nccl
BOUND = {"all_gather": {16: 236978176, 32: 494927872, 64: 956301312, 384: 7247754240, 896: 17179865088},
         "reduce_scatter": {16: 291504128, 32: 589299712, 128: 2415919104, 256: 7247757312, 640: 17179869184}}
def cross(coll, f):
    lo, hi = 1 << 20, 1 << 36
    def d(b):
        return (nccl.estimate_algo(coll, b, f, "ring", "Simple").time_us
                - nccl.estimate_algo(coll, b, f, "ring", "LL128").time_us)
    # scan upward in 2^(1/8) steps for the first size where Simple is faster and stays faster
    b = lo
    last = None
    while b < hi:
        if d(b) < 0 and d(b * 1.5) < 0 and d(b * 3) < 0:
            return b
        b *= 2 ** 0.125
    return math.nan
print("share  hop_us | " + " | ".join(f"{c[:2].upper()} {r} ranks: model / AWS MiB" for c in BOUND for r in BOUND[c]))
for share in (0.5, 37.5 / 35):
    cells = []
    for coll, bounds in BOUND.items():
        for ranks, b in bounds.items():
            f = nccl.with_terms(nccl.Fabric(ranks // 8, 8, 368.5, 50.0, "efa", platform="p5en"), net_hop_share=share)
            cells.append(f"{cross(coll, f) / 2**20:7.0f} / {b / 2**20:6.0f}")
    print(f"{share:5.3f} {share * 35:6.1f} | " + " | ".join(cells))
