"""Static SM splits of the fused ops on real NVLink (issue 11, step 5; issue 7's hw sweep).

Run under torchrun, one rank per GPU, all GPUs one node. For each op at one size of the reference
grid it runs the fused schedule with every intra-node SM budget of ``--comm-sms`` (compute gets the
rest): one poisoned call checked against the op's torch fallback (NCCL + torch in float32, the same
inputs), then ``--iters`` calls between CUDA events; the median per rank, then the slowest rank.
The float32 fallback's time is recorded (``fallback_s``) but is no speed baseline: `mkernel bench`
times the bf16 baselines. Rank 0 writes the splits table of :mod:`mkernel.studies.splits` (one
schema with `mkernel sweep --comm-sms`): `mkernel run --splits` takes its best split for this
machine's op and shape, and `mkernel accuracy --splits` reads the measured curves in its entries.

    torchrun --nproc-per-node 2 tools/studies/hw_splits.py --out splits.json
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

CONFIGS = (("gemm_ar", 8192), ("gemm_rs", 8192), ("ag_gemm", 8192), ("ring_attention", 1536),
           ("moe_dispatch_gemm", 16384))


def cluster(world: int, sms: int):
    """The one-node cluster the schedules are built for, and the splits table's entries name."""
    from mkernel.cluster import Cluster

    return Cluster("hw", 1, world).with_sms(sms)


def table_rows(rows: list[dict], world: int, sms: int, **meta) -> list[dict]:
    """The combined rows (the slowest rank's time per split) as :func:`mkernel.studies.splits.write`
    takes them; ``meta`` (GPU, torch, commit, iters, copy rows) goes into each entry's ``measured``."""
    from mkernel.problems import Workload
    from mkernel.scenario import Scenario
    from mkernel.studies import splits

    c = cluster(world, sms)
    return [splits.measured_row(Scenario("hw_splits", c, Workload(kernel=r["kernel"], **r["shape"])), r["size"],
                                r["shape"], {int(n): x for n, x in r["splits"].items()},
                                fallback_s=r["fallback_s"], **meta) for r in rows]


def one_config(kernel: str, size: int, splits: list[int], iters: int, rank: int, world: int, knobs) -> dict:
    import dataclasses

    import numpy as np
    import torch

    from mkernel import builders
    from mkernel.hw import rank as hw_rank
    from mkernel.hw.runtime.context import Context
    from mkernel.hw.runtime.executor import Executor
    from mkernel.ir import Role
    from mkernel.problems import Workload
    from mkernel.reference import BF16_LOOSE_RTOL
    from mkernel.studies.sweep import reference_grid

    point = next(p for p in reference_grid(kernels=(kernel,)) if p.size == size)
    w = Workload(kernel=kernel, **dict(point.shape))
    sms = torch.cuda.get_device_properties(rank).multi_processor_count
    c = cluster(world, sms)
    module = builders.get(kernel)
    arrays = module.make_inputs(w, c, np.random.default_rng(11))
    mine = {n: torch.from_numpy(np.ascontiguousarray(per[rank])).cuda().bfloat16() for n, per in arrays.items()}
    ref_fn = hw_rank.fallback_fn(w, mine, world)
    refs = {n: t.float() for n, t in ref_fn().items()}
    row = {"kernel": kernel, "size": size, "shape": dict(point.shape), "world": world,
           "fallback_s": hw_rank.median_s(ref_fn, iters), "splits": {}}
    for n in splits:
        ws = dataclasses.replace(w, sms=((Role.INTRA, n),))
        schedule = module.build(ws, c)
        with Context(None, gpus_per_node=world, send_bytes=0, knobs=knobs, **Executor.context_sizes(schedule)) as ctx:
            op = Executor(schedule, ctx)
            outs = op(mine, poison=True)
            op.check()
            err = max(((outs[k].float() - r).norm() / r.norm()).item() for k, r in refs.items())
            nan = int(sum(torch.isnan(outs[k].float()).sum().item() for k in refs))
            t = hw_rank.median_s(lambda: op(mine, outs), iters)
            op.check()
        row["splits"][n] = {"s": t, "rel_err": err, "unwritten": nan, "ok": err <= BF16_LOOSE_RTOL and nan == 0,
                            "compute_sms": schedule.launches[0].budget(Role.COMPUTE)}
        torch.distributed.barrier()
    return row


def main() -> None:
    import torch
    import torch.distributed as dist

    from mkernel.hw.knobs import HwKnobs
    from mkernel.hw.runtime.safety import apply_no_multicast
    from mkernel.studies import splits as splits_table

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--comm-sms", default="2,4,8,16,32,64")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--kernels", nargs="*", default=[k for k, _ in CONFIGS])
    ap.add_argument("--copy-rows", type=int, default=0, help="rows per copy step of the fused kernel (0: its default)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    apply_no_multicast()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl", device_id=torch.device("cuda", int(os.environ["LOCAL_RANK"])))
    splits = [int(x) for x in args.comm_sms.split(",")]
    knobs = HwKnobs(copy_rows=args.copy_rows) if args.copy_rows else HwKnobs()
    rows = []
    for kernel, size in CONFIGS:
        if kernel in args.kernels:
            mine = one_config(kernel, size, splits, args.iters, rank, world, knobs)
            every = [None] * world
            dist.all_gather_object(every, mine)
            row = every[0]
            for n in splits:  # the slowest rank, and every rank's check
                per = [r["splits"][n] for r in every]
                row["splits"][n] = {"s": max(x["s"] for x in per), "rel_err": max(x["rel_err"] for x in per),
                                    "ok": all(x["ok"] for x in per), "compute_sms": per[0]["compute_sms"]}
            row["fallback_s"] = max(r["fallback_s"] for r in every)
            rows.append(row)
            if rank == 0:
                best = min(splits, key=lambda n: row["splits"][n]["s"])
                print(f"{kernel:<18} {size:>6}  intra SMs: us  " + "  ".join(
                    f"{n}:{row['splits'][n]['s'] * 1e6:.1f}{'' if row['splits'][n]['ok'] else ' WRONG'}" for n in splits)
                    + f"  best {best}", flush=True)
    if rank == 0:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        commit = Path(".commit").read_text().strip() if Path(".commit").exists() else None
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        splits_table.write(table_rows(rows, world, sms, gpu=torch.cuda.get_device_name(0), torch=torch.__version__,
                                      commit=commit, iters=args.iters, copy_rows=knobs.copy_rows), args.out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
