"""Run N ranks on the GPUs at hand: one process per rank, several per GPU under MPS when ranks
outnumber GPUs, each with an SM budget, and a gloo process group (NCCL refuses two ranks on a GPU).

Why MPS: without it, spinning kernels of different processes take turns on the GPU at time-slice
granularity (milliseconds per flag ping-pong); under MPS they run at once. Persistent grids must
together fit on the GPU, so each rank gets ``sm_budget`` = SMs // ranks per GPU and sizes its grid by it.

Timings from an emulated cluster are not NVLink or NIC timings: every rank shares one GPU's SMs, HBM
and copy engines.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import queue
import shutil
import socket
import subprocess
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mkernel.errors import BackendUnavailable, MkernelError

from .safety import apply_no_multicast

EMULATION_NOTE = ("emulated cluster: all ranks share one GPU's SMs, HBM and copy engines, so these timings "
                  "are not NVLink or NIC timings")


@dataclass(frozen=True)
class RankInfo:
    rank: int
    world: int
    device: int
    sm_budget: int  # SMs this rank's persistent grids may use
    emulated: bool  # several ranks share this GPU


class RankFailed(MkernelError):
    """A rank raised, or did not finish in time; the message carries its rank and traceback."""


class Mps:
    """Start an MPS control daemon for this launch (and stop it after), unless one already runs."""

    def __init__(self, root: Path):
        self.env = {"CUDA_MPS_PIPE_DIRECTORY": str(root / "pipe"), "CUDA_MPS_LOG_DIRECTORY": str(root / "log")}
        self.started = False

    def __enter__(self) -> Mps:
        ctl = shutil.which("nvidia-cuda-mps-control")
        if ctl is None:
            raise BackendUnavailable("several ranks per GPU need MPS, and nvidia-cuda-mps-control is not on PATH")
        for d in self.env.values():
            Path(d).mkdir(parents=True, exist_ok=True)
        subprocess.run([ctl, "-d"], env={**os.environ, **self.env}, check=True, timeout=30)
        self.started = True
        return self

    def __exit__(self, *exc) -> None:
        if self.started:
            subprocess.run(["nvidia-cuda-mps-control"], input="quit\n", text=True, env={**os.environ, **self.env},
                           timeout=30, check=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(fn, info: RankInfo, port: int, env: dict, args: tuple, out) -> None:
    os.environ.update(env)
    try:
        import torch
        import torch.distributed as dist

        torch.cuda.set_device(info.device)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=info.rank,
                                world_size=info.world)
        try:
            out.put((info.rank, "ok", fn(info, *args)))
        finally:
            dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - everything a rank raises goes back to the launcher
        out.put((info.rank, "error", traceback.format_exc()))


def launch(fn: Callable, world: int, *, args: tuple = (), gpus: int | None = None, sms: int = 132,
           timeout_s: float = 300.0) -> list:
    """Run ``fn(RankInfo, *args)`` on ``world`` ranks; return their results in rank order.

    ``fn`` must be importable (a module-level function): ranks are spawned, not forked, because CUDA
    cannot be initialised in a forked child.
    """
    if gpus is None:
        import torch

        gpus = torch.cuda.device_count()
    if gpus < 1:
        raise BackendUnavailable("the hw backend needs a CUDA GPU; none is visible")
    per_gpu = -(-world // gpus)
    env = apply_no_multicast(dict(os.environ))
    env["TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES"] = "1" if per_gpu > 1 else env.get(
        "TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES", "0")
    port = _free_port()
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="mkernel-mps-") as root:
        mps = Mps(Path(root)) if per_gpu > 1 else None
        if mps:
            mps.__enter__()
            env.update(mps.env)
        procs = []
        try:
            for r in range(world):
                info = RankInfo(r, world, r % gpus, sms // per_gpu, per_gpu > 1)
                p = ctx.Process(target=_rank_main, args=(fn, info, port, env, args, out), daemon=True)
                p.start()
                procs.append(p)
            results: dict[int, object] = {}
            while len(results) < world:
                try:
                    rank, status, value = out.get(timeout=timeout_s)
                except queue.Empty:
                    missing = sorted(set(range(world)) - set(results))
                    raise RankFailed(f"ranks {missing} did not finish within {timeout_s} s") from None
                if status == "error":
                    raise RankFailed(f"rank {rank} failed:\n{value}")
                results[rank] = value
            for p in procs:
                p.join(timeout=30)
            return [results[r] for r in range(world)]
        finally:
            for p in procs:
                if p.is_alive():
                    p.kill()
            if mps:
                mps.__exit__(None, None, None)
