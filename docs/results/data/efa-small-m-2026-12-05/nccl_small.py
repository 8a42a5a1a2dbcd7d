"""2 x p5 all_reduce at 8 B - 1 KiB (aws-samples/awsome-distributed-training, micro-benchmarks/nccl-tests/README.md,
the 2x p5.48xlarge output): what NCCL runs, what the model predicts, and the one-way network hop it implies.
NCCL's tree on 2 nodes: 7 NVLink hops up each node's chain, one network hop each way, 7 down."""
import statistics
from mkernel import nccl, nccl_tuner

# (out-of-place, in-place) us, sizes 8 B .. 1 KiB, as published
MEASURED = [(69.12, 72.43), (72.64, 73.91), (74.06, 64.75), (65.48, 74.40), (74.92, 65.43), (74.12, 65.70),
            (69.50, 66.88), (69.24, 69.04)]
f = nccl.Fabric(2, 8, 370.0, 50.0, "efa", True, platform="p5")
t = [x for pair in MEASURED for x in pair]
med = statistics.median(t)
print(f"measured 8 B - 1 KiB: {min(t):.1f}-{max(t):.1f} us, median {med:.1f}")
print("NCCL runs:", nccl_tuner.choose("all_reduce", 8, f), "model:", f"{nccl.estimate('all_reduce', 8, f).time_us:.1f} us")
base = nccl_tuner.BASE_US["tree"][0]
for nvl_hop in (nccl_tuner.NVLINK_HOP_US["tree"][0], 1.2377):  # NCCL's LL NVLink hop; our H200 pair's measured latency
    hop = (med - base - 14 * nvl_hop) / 2
    print(f"NVLink hop {nvl_hop:.2f} us: one network hop (GPU write -> peer GPU sees it, through NCCL's proxy) = {hop:.1f} us")
