"""NCCL's collectives alone on two GPUs of one node (issue 29): busbw against size, to replace the
own-h200x2 curves of scenarios/nccl/published.toml, which are a difference of two medians measured apart
(docs/results/2026-12-05-nccl-model.md). Run on a machine with 2 GPUs, after tools/device/device_setup.sh
(no NVLink multicast):  torchrun --nproc-per-node 2 tools/probes/nccl_pair.py --out $OUT/nccl_pair.json"""
from __future__ import annotations

import argparse
import json

import torch
import torch.distributed as dist

SIZES_MIB = (8, 32, 128, 512, 1152, 2048)  # the full (gathered / reduced) buffer, as the curves' points


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank)
    rows = []
    for mib in SIZES_MIB:
        n = mib << 19  # bf16 elements
        full = torch.empty(n, dtype=torch.bfloat16, device="cuda")
        part = torch.empty(n // world, dtype=torch.bfloat16, device="cuda")
        ops = {"all_gather": lambda: dist.all_gather_into_tensor(full, part),
               "reduce_scatter": lambda: dist.reduce_scatter_tensor(part, full),
               "all_reduce": lambda: dist.all_reduce(full)}
        for name, op in ops.items():
            for _ in range(3):
                op()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(args.iters):
                op()
            end.record()
            end.synchronize()
            t = start.elapsed_time(end) / args.iters / 1e3
            factor = 2 * (world - 1) / world if name == "all_reduce" else (world - 1) / world  # nccl-tests busbw
            rows.append({"collective": name, "bytes": n * 2, "time_us": t * 1e6,
                         "busbw_gb_per_s": n * 2 / t * factor / 1e9})
            if rank == 0:
                print(f"{name:15s} {mib:5d} MiB {t * 1e6:10.1f} us {rows[-1]['busbw_gb_per_s']:7.1f} GB/s", flush=True)
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump({"world": world, "nccl": ".".join(map(str, torch.cuda.nccl.version())), "rows": rows}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
