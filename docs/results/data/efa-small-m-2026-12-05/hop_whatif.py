"""p5en, 2 nodes: NCCL's all_gather on Simple and on LL128 against the network hop latency beyond NCCL's
constant (net_hop_us; 37.5 is the EFA fit on p5): how small the hop must be for the Simple cliff at
96-192 MiB to go."""
from mkernel import nccl

f0 = nccl.Fabric(2, 8, 368.5, 50.0, "efa", False, platform="p5en")
print("switch:", [(mib, nccl.estimate("all_gather", mib << 20, f0).proto) for mib in (64, 96, 128, 192, 256)])
for hop in (37.5, 25.0, 15.0, 5.0, 0.0):
    f = nccl.with_terms(f0, net_hop_us=hop)
    row = []
    for mib in (96, 128, 192, 256):
        s = nccl.estimate_algo("all_gather", mib << 20, f, "ring", "Simple")
        ll = nccl.estimate_algo("all_gather", mib << 20, f, "ring", "LL128")
        row.append(f"{mib} MiB Simple {s.busbw_gb_per_s:5.1f} LL128 {ll.busbw_gb_per_s:5.1f}")
    print(f"net_hop_us {hop:5.1f}: " + " | ".join(row))
