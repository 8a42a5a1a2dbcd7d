"""The NCCL calls of the paper's testbeds (paper-efa-2x8, paper-ib-2x8): time (us) and what NCCL runs,
with the EFA hop share as committed (p5en hop 0.5 x 35 us = 17.5 us) and, for the record of before, the
share that gives p5's 37.5 us on p5en (the model before this change). Run from the repository root."""
from mkernel import nccl
from mkernel.scenario import load_scenario

MiB = 1 << 20
efa = nccl.fabric_of(load_scenario("scenarios/paper-efa-2x8.toml").cluster)
ib = nccl.fabric_of(load_scenario("scenarios/paper-ib-2x8.toml").cluster)
before = nccl.with_terms(efa, net_hop_share=37.5 / 35.0)
print(f"EFA hop beyond NCCL's constant: before {before.net_hop_us:.1f} us, now {efa.net_hop_us:.1f} us; IB {ib.net_hop_us:.1f}")
print("| collective | size | EFA before | EFA now | IB |")
print("| --- | --- | --- | --- | --- |")
for coll in ("all_gather", "reduce_scatter", "all_reduce"):
    for size in (8, 32, 64, 128, 256, 512, 2048, 6144):
        cells = []
        for f in (before, efa, ib):
            e = nccl.estimate(coll, size * MiB, f)
            cells.append(f"{e.time_us:.0f} ({e.algo}/{e.proto})")
        print(f"| {coll} | {size} MiB | " + " | ".join(cells) + " |")
print()
print("2 x p5en all_gather, ring LL128 / ring Simple us (* = NCCL's pick), by hop share")
sizes = (8, 16, 32, 64, 96, 128, 192, 256, 512, 2048)
print("share hop_us " + " ".join(f"{s:>12d}" for s in sizes))
for share in (37.5 / 35.0, 0.75, 0.5, 0.25, 0.0):
    f = nccl.with_terms(efa, net_hop_share=share)
    cells = []
    for s in sizes:
        ll, si = (nccl.estimate_algo("all_gather", s * MiB, f, "ring", p).time_us for p in ("LL128", "Simple"))
        cells.append(f"{ll:5.0f}/{si:5.0f}{'*' if nccl.estimate('all_gather', s * MiB, f).proto == 'Simple' else ' '}")
    print(f"{share:5.3f} {f.net_hop_us:6.1f} " + " ".join(cells))
