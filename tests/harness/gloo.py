"""Gloo ranks on the CPU: ``world`` processes in one process group, each running ``fn(rank, world)``,
for the torch paths' tests (no GPU, no NCCL). A rank's exception comes back as its traceback."""
from __future__ import annotations

import os


def ranks(world: int, fn) -> list:
    """``sorted((rank, fn(rank, world)))`` over ``world`` spawned gloo ranks; a rank that raised fails the test."""
    import torch.multiprocessing as mp

    port = 29600 + world * 7 + os.getpid() % 97
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_rank_main, args=(r, world, port, fn, q)) for r in range(world)]
    for p in procs:
        p.start()
    out = [q.get(timeout=180) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    errors = [o for o in out if isinstance(o, str)]
    assert not errors, errors[0]
    return sorted(out)


def _rank_main(rank: int, world: int, port: int, fn, q) -> None:
    import traceback

    import torch.distributed as dist

    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
        q.put((rank, fn(rank, world)))
    except Exception:  # noqa: BLE001 - the test reports it
        q.put(f"rank {rank}: {traceback.format_exc()}")
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
