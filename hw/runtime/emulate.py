"""Run N ranks on the GPUs at hand: one process per rank, several per GPU under MPS when ranks
outnumber GPUs, each with an SM budget, and a gloo process group (NCCL refuses two ranks on a GPU).

Why MPS: without it, spinning kernels of different processes take turns on the GPU at time-slice
granularity (milliseconds per flag ping-pong); under MPS they run at once. Persistent grids must
together fit on the GPU, so each rank gets ``sm_budget`` = SMs // ranks per GPU and sizes its grid by it.

Timings from an emulated cluster are not NVLink or NIC timings: every rank shares one GPU's SMs, HBM
and copy engines.
"""
from __future__ import annotations

import datetime
import faulthandler
import multiprocessing as mp
import os
import queue
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mkernel.errors import BackendUnavailable, InputError, MkernelError

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


# Hardware work queues each rank asks for under MPS. Streams beyond a client's queues share them, and
# a loopback copy stream sharing the compute stream's queue waits behind the persistent kernel that
# waits for its copies: with 1 queue, one op on the emulated 2x2 timed out in its first call (H200).
# 8 is what the passing 10k-call long run used; 4 clients x 32 exhausted MPS's shared pool (the 4th
# rank's CUDA init: out of memory). docs/results/2026-12-01-reliability-hw-3.md.
MPS_WORK_QUEUES = 8


_STEP_FILE: list[Path] = []  # in a rank process: where rank_step writes (set by _rank_main)


def rank_step(text: str) -> None:
    """Name what this rank is doing now, for the launcher's deadline and timeout messages."""
    if _STEP_FILE:
        try:
            _STEP_FILE[0].write_text(f"{time.monotonic():.3f} {text}")
        except OSError:
            pass  # a step line is a courtesy; the run must not fail for it


class _RankSteps:
    """The launcher's view of each rank's last :func:`rank_step` (for :func:`mkernel.limits.bounded`)."""

    def __init__(self, folder: Path, world: int) -> None:
        self.folder, self.world = folder, world

    def path(self, rank: int) -> Path:
        return self.folder / f"rank{rank}.step"

    def deadline_status(self) -> str:
        now, parts = time.monotonic(), []
        for r in range(self.world):
            try:
                stamp, _, text = self.path(r).read_text().partition(" ")
                parts.append(f"rank {r}: {text} ({now - float(stamp):.0f} s)")
            except (OSError, ValueError):
                parts.append(f"rank {r}: starting")
        return "GPU ranks: " + ", ".join(parts)


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


def _rank_main(fn, info: RankInfo, port: int, env: dict, args: tuple, out, deadline_s: float,
               collective_timeout_s: float, step_file: Path | None = None) -> None:
    """One rank: its result (or traceback) is put once and flushed to the launcher *before* the
    process group is torn down, since after a CUDA fault teardown can abort the process and a result
    still in the queue's feeder thread would be lost (the launcher then saw a hang, not the fault).
    A rank still running just before the launcher's deadline dumps every thread's stack to stderr,
    as it does on SIGUSR1 (a device script stopping a stuck run sends it first). Every collective and
    store wait of the rank's process group (the fallbacks' all-reduces, the symmetric-memory
    rendezvous) gives up after ``collective_timeout_s`` with torch's error."""
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    faulthandler.dump_traceback_later(max(1.0, deadline_s - 5.0))
    _STEP_FILE[:] = [step_file] if step_file else []
    os.environ.update(env)
    dist = None
    try:
        import torch
        import torch.distributed as dist

        torch.cuda.set_device(info.device)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=info.rank,
                                world_size=info.world, timeout=datetime.timedelta(seconds=collective_timeout_s))
        report = (info.rank, "ok", fn(info, *args))
    except BaseException:  # noqa: BLE001 - everything a rank raises goes back to the launcher
        report = (info.rank, "error", traceback.format_exc())
    faulthandler.cancel_dump_traceback_later()
    out.put(report)
    out.close()
    out.join_thread()
    if dist is not None and dist.is_initialized():
        dist.destroy_process_group()


def _collect(procs: list, out, timeout_s: float, poll_s: float = 0.5,
             steps: _RankSteps | None = None, grace_s: float = 5.0) -> dict[int, object]:
    """Every rank's result, in a dict by rank. Raises :class:`RankFailed` once a rank reports an
    error, a rank exits without a result (a crash: its exit code, and its stderr above), or
    ``timeout_s`` passes first. Polls, so a dead rank is noticed within ``poll_s``, not at the
    deadline. After the first error it keeps listening up to ``grace_s`` (within the deadline) for
    the other ranks' reports and names them all: in a collective failure the first rank to report
    is often not the one that stalled, only one that waited for it (2026-12-05: GEMM+RS's fault
    runs showed rank 0's go-flag timeout and nothing of its peers)."""
    world, results, errors = len(procs), {}, {}
    deadline = time.monotonic() + timeout_s

    def take(wait_s: float) -> bool:
        try:
            rank, status, value = out.get(timeout=wait_s)
        except queue.Empty:
            return False
        (errors if status == "error" else results)[rank] = value
        return True

    def settled() -> bool:
        return all(r in results or r in errors or p.exitcode is not None for r, p in enumerate(procs))

    while len(results) < world:
        if take(poll_s):
            if errors:
                until = min(deadline, time.monotonic() + grace_s)
                while not settled() and time.monotonic() < until:
                    take(min(poll_s, max(0.0, until - time.monotonic())))
                while take(0.0):  # reports already in the pipe
                    pass
                raise RankFailed(_failures(errors, results, world, steps))
            continue
        dead = [r for r, p in enumerate(procs) if r not in results and p.exitcode is not None]
        if dead:
            while take(poll_s):  # a result put just before exiting may still be in the pipe
                pass
            if errors:
                raise RankFailed(_failures(errors, results, world, steps))
            dead = [r for r in dead if r not in results]
            if dead:
                codes = ", ".join(f"rank {r}: exit code {procs[r].exitcode}" for r in dead)
                raise RankFailed(f"ranks {dead} exited without a result ({codes}; a negative code is the "
                                 f"signal that killed it); their stderr is above")
        if time.monotonic() > deadline:
            missing = sorted(set(range(world)) - set(results))
            raise RankFailed(f"ranks {missing} did not finish within {timeout_s} s"
                             + (f"; {steps.deadline_status()}" if steps else ""))
    return results


def _failures(errors: dict[int, str], results: dict, world: int, steps: _RankSteps | None) -> str:
    """The first failed rank's traceback, then one line per rank: its error's last line, ok, or silent."""
    first = next(iter(errors))  # the first to report
    lines = [f"rank {first} failed:\n{errors[first]}", "every rank:"]
    for r in range(world):
        if r in errors:
            last = [ln for ln in errors[r].strip().splitlines() if ln.strip()]
            lines.append(f"  rank {r}: {last[-1] if last else 'failed'}")
        else:
            lines.append(f"  rank {r}: " + ("finished" if r in results else "no report"))
    if steps:
        lines.append(steps.deadline_status())
    return "\n".join(lines)


def launch(fn: Callable, world: int, *, args: tuple = (), gpus: int | None = None, sms: int = 132,
           timeout_s: float = 300.0, collective_timeout_s: float = 120.0, module_loading: str = "EAGER",
           rank_args: list[tuple] | None = None) -> list:
    """Run ``fn(RankInfo, *args, *rank_args[rank])`` on ``world`` ranks; return their results in rank
    order. ``rank_args`` (one tuple per rank) go to their rank alone: each rank's own inputs, not
    every rank's copied into every process.
    ``timeout_s`` bounds the whole run, ``collective_timeout_s`` each collective or store wait.
    ``module_loading``: CUDA_MODULE_LOADING of ranks that share a GPU (EAGER, or LAZY to compare).

    ``fn`` must be importable (a module-level function): ranks are spawned, not forked, because CUDA
    cannot be initialised in a forked child.
    """
    if module_loading not in ("EAGER", "LAZY"):
        raise InputError(f"module_loading={module_loading!r}: EAGER or LAZY")
    if gpus is None:
        import torch

        gpus = torch.cuda.device_count()
    if gpus < 1:
        raise BackendUnavailable("the hw backend needs a CUDA GPU; none is visible")
    per_gpu = -(-world // gpus)
    env = apply_no_multicast(dict(os.environ))
    env["TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES"] = "1" if per_gpu > 1 else env.get(
        "TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES", "0")
    if per_gpu > 1:
        env.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", str(MPS_WORK_QUEUES))
        # every module loaded when a rank's context starts: a lazy load later (a torch kernel's first
        # use, e.g. in a fallback) holds the context lock until the GPU drains, blocking the loopback
        # proxy that a running fused kernel waits on (hw/runtime/executor.py says more). Set, not defaulted:
        # torch may have put LAZY into this process's environment when it initialised CUDA.
        env["CUDA_MODULE_LOADING"] = module_loading
    port = _free_port()
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="mkernel-mps-") as root:
        mps = Mps(Path(root)) if per_gpu > 1 else None
        if mps:
            mps.__enter__()
            env.update(mps.env)
        procs = []
        steps = _RankSteps(Path(root), world)  # each rank's last step, for deadline and timeout messages
        try:
            for r in range(world):
                info = RankInfo(r, world, r % gpus, sms // per_gpu, per_gpu > 1)
                own = args + (tuple(rank_args[r]) if rank_args else ())
                p = ctx.Process(target=_rank_main, args=(fn, info, port, env, own, out, timeout_s,
                                                                  collective_timeout_s, steps.path(r)),
                               daemon=True)
                p.start()
                procs.append(p)
            results = _collect(procs, out, timeout_s, steps=steps)
            for p in procs:
                p.join(timeout=30)
            return [results[r] for r in range(world)]
        finally:
            for p in procs:
                if p.is_alive():
                    p.kill()
            if mps:
                mps.__exit__(None, None, None)
