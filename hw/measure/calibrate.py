"""`mkernel calibrate`: microbenchmarks on the GPU at hand, as the raw measurements that
:func:`mkernel.studies.profile.fit` turns into a hardware profile.

Everything is timed as CUDA-graph replays (``triton.testing.do_bench_cudagraph``, its median), so
Python launch cost is in no figure. What is measured, and why the simulator needs it:

- ``matmul``: cuBLAS and the fused kernel's GEMM on all SMs: the per-SM matmul rate, and how close
  the fused kernel's tiles come to the library the baselines call;
- ``gemm_sms``: the fused kernel's GEMM on 8..132 SMs with 128x256 and 128x128 workload tiles on one
  shape, so that tile shape and wave quantisation (tiles not a multiple of the SMs) can be checked
  against the model;
- ``hbm``: a device-to-device copy; ``stream``: a copy kernel on 1..132 blocks (what one
  communication SM streams);
- ``attention``: flash SDPA, SDPA's default dispatch and our fused attention at world 1;
- ``extra``: pinned host<->device copies (not a model term; kept with the profile);
- ``proxy`` and ``loopback``: the command ring -> native proxy -> loopback path of
  :mod:`mkernel.hw.measure.selftest` at several batch limits and message sizes;
- ``peer`` (two or more GPUs): NVLink copy rates, per-message cost and latency (:mod:`mkernel.hw.measure.peer`).

Total GPU time on one H200: about two minutes; ``only=("peer",)`` measures NVLink alone (seconds).
"""
from __future__ import annotations

import datetime
import subprocess

import triton
import triton.language as tl

from mkernel.errors import BackendUnavailable

from .bench import time_events

GEMM_SHAPE = (4096, 4096, 4096)
GEMM_SMS = (8, 16, 33, 66, 100, 132)
GEMM_TILES = ((128, 256), (128, 128))  # workload tiles: the first fills the kernel's 128 x 256 tile (plan.GEMM_TILE)
STREAM_PROGRAMS = (1, 2, 4, 8, 16, 33, 66, 132)
PROXY_BATCHES = (1, 2, 4, 8)


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr, NUM_PROGRAMS: tl.constexpr):
    """dst[:n] = src[:n] (int64 words; n a multiple of BLOCK), a strided walk by NUM_PROGRAMS blocks."""
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    for start in range(pid * BLOCK, n, NUM_PROGRAMS * BLOCK):
        tl.store(dst + start + offs, tl.load(src + start + offs))


COPY_SIGNATURE = ({"src": "*i64", "dst": "*i64", "n": "i32"}, {"BLOCK": 2048, "NUM_PROGRAMS": 132})


def _bench(fn, rep_ms: int = 100) -> float:
    """Median seconds per call of ``fn`` replayed from a CUDA graph."""
    from triton.testing import do_bench_cudagraph

    fn()
    return do_bench_cudagraph(fn, rep=rep_ms) * 1e-3


def _driver() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def meta(commit: str, command: str) -> dict:
    import torch

    props = torch.cuda.get_device_properties(0)
    return {"date": datetime.date.today().isoformat(), "gpu": props.name, "gpu_short": props.name.removeprefix("NVIDIA "),
            "sms": props.multi_processor_count, "driver": _driver(), "torch": torch.__version__,
            "commit": commit, "command": command}


def _fused_gemm(a, b, sms: int | None = None, tile: tuple[int, int] | None = None):
    """A call of the fused kernel computing ``a @ b``: ``gemm_ar`` at world 1 (nothing to reduce, so
    the kernel's compute role alone) on ``sms`` SMs (default: all) with workload tiles ``tile``
    (default: the workload's). What it runs is what every fused GEMM op runs: tiles that fill the
    kernel's 128 x 256 tile go through the GEMM table (``tiles._gemm_rows``), others through the task
    path (``tiles._mma``), as :func:`mkernel.hw.lowering.plan.gemm_table` decides."""
    from mkernel.problems import Workload

    from .. import ops

    (m, k), n = a.shape, b.shape[1]
    shape = {} if tile is None else {"tile_m": tile[0], "tile_n": tile[1]}
    ex = ops.executor(Workload(kernel="gemm_ar", m=m, n=n, k=k, **shape), "", 1, sms or 0)
    return lambda: ex({"A": a, "B": b})["OUT"]


def matmul() -> dict:
    import torch

    m, n, k = 8192, 8192, 8192
    a, b = (torch.randn(s, device="cuda", dtype=torch.bfloat16) for s in ((m, k), (k, n)))
    ours = _fused_gemm(a, b)
    ref = a.double() @ b.double()
    err = ((ours().double() - ref).norm() / ref.norm()).item()
    flops = 2.0 * m * n * k
    t_lib = _bench(lambda: torch.matmul(a, b))
    t_ours = _bench(ours)
    return {"shape": f"{m}x{n}x{k}", "kernel": "fused", "cublas_tflops": flops / t_lib / 1e12,
            "ours_tflops": flops / t_ours / 1e12, "ours_rel_err": err}


def gemm_sms() -> list[dict]:
    """The fused kernel's GEMM on ``sms`` SMs, two workload tile shapes: time, tiles and waves."""
    import torch

    m, n, k = GEMM_SHAPE
    a, b = (torch.randn(s, device="cuda", dtype=torch.bfloat16) for s in ((m, k), (k, n)))
    rows = []
    for bm, bn in GEMM_TILES:
        tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
        for sms in GEMM_SMS:
            t = _bench(_fused_gemm(a, b, sms, (bm, bn)), rep_ms=60)
            rows.append({"m": m, "n": n, "k": k, "bm": bm, "bn": bn, "sms": sms, "tiles": tiles,
                         "waves": triton.cdiv(tiles, sms), "us": t * 1e6, "kernel": "fused"})
    return rows


def hbm(nbytes: int = 1 << 30) -> dict:
    import torch

    src = torch.empty(nbytes // 8, device="cuda", dtype=torch.int64).random_()
    dst = torch.empty_like(src)
    t = _bench(lambda: dst.copy_(src))
    return {"bytes": nbytes, "gb_per_s": 2 * nbytes / t / 1e9}


def stream(nbytes: int = 256 << 20) -> list[dict]:
    """The copy kernel on a few blocks: what one SM streams through HBM (bytes read + written)."""
    import torch

    words = nbytes // 8
    src = torch.empty(words, device="cuda", dtype=torch.int64).random_()
    rows = []
    for programs in STREAM_PROGRAMS:
        dst = torch.full_like(src, -1)
        launch = lambda: copy_kernel[(programs,)](src, dst, words, BLOCK=2048, NUM_PROGRAMS=programs)  # noqa: E731
        launch()
        ok = bool(torch.equal(dst, src))
        t = _bench(launch, rep_ms=60)
        rows.append({"programs": programs, "gb_per_s": 2 * nbytes / t / 1e9, "checked": ok})
    return rows


def attention(B: int = 4, H: int = 16, S: int = 4096, D: int = 128) -> dict:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from .. import api

    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    flops = 4.0 * B * H * S * S * D
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        ref = F.scaled_dot_product_attention(q, k, v)
        t_sdpa = _bench(lambda: F.scaled_dot_product_attention(q, k, v))
    t_default = _bench(lambda: F.scaled_dot_product_attention(q, k, v))  # what a user gets (cuDNN here)
    # mode="fused": at world 1 "auto" takes the torch path (hw/dispatch.py), so fused_attention_efficiency timed
    # torch's SDPA instead of our kernel (2026-12-05: 669 TFLOPS, 1.94x flash; the kernel runs ~0.8x cuDNN)
    ours = lambda: api.ring_attention(q, k, v, mode="fused")  # noqa: E731
    out, _ = ours()
    err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
    t_ours = time_events(ours, 3, 20)  # eager, as the op is called
    return {"shape": f"B={B} H={H} S={S} D={D}", "sdpa_tflops": flops / t_sdpa / 1e12,
            "sdpa_default_tflops": flops / t_default / 1e12,
            "fused_tflops": flops / t_ours / 1e12, "fused_rel_err": err}


def host_copies(nbytes: int = 256 << 20) -> dict:
    import torch

    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    h2d = _bench(lambda: dev.copy_(host, non_blocking=True))
    d2h = _bench(lambda: host.copy_(dev, non_blocking=True))
    return {"h2d_gb_per_s": nbytes / h2d / 1e9, "d2h_gb_per_s": nbytes / d2h / 1e9}


def proxy() -> tuple[dict, dict]:
    """(proxy, loopback) figures of the ring -> native proxy -> loopback path."""
    from . import selftest

    batches = []
    for batch in PROXY_BATCHES:
        r = selftest.stream(n_blocks=64, chunks_per_block=256, signal_only=True, max_batch=batch)
        batches.append({"batch": batch, "cmds_per_s": r["cmds_per_s"], "error": r["error"]})
    push = selftest.stream(n_blocks=1, chunks_per_block=256, signal_only=True)  # one producer: no credit waits
    rt_proxy = selftest.roundtrip(n=5000, host_flags=True)
    rt_put = selftest.roundtrip(n=5000, nbytes=64)
    small = selftest.stream(n_blocks=64, chunks_per_block=64, chunk_bytes=64)
    big = selftest.stream(n_blocks=8, chunks_per_block=16, chunk_bytes=1 << 20, capacity=1024)
    prox = {"batches": batches, "push_us": push["push_s_per_block"] / 256 * 1e6, "push_wait_us": push["wait_s_per_block"],
            "roundtrip_proxy_us": rt_proxy["p50_us"], "roundtrip_proxy_p99_us": rt_proxy["p99_us"]}
    loop = {"put_bytes": 1 << 20, "gb_per_s": big["cmds_per_s"] * (1 << 20) / 1e9, "big_mismatches": big["mismatches"],
            "small_cmds_per_s": small["cmds_per_s"], "small_mismatches": small["mismatches"],
            "roundtrip_put_us": rt_put["p50_us"]}
    return prox, loop


SECTIONS = ("gpu", "proxy", "peer")


def run(commit: str, command: str, progress=print, only: tuple[str, ...] = SECTIONS) -> dict:
    """The microbenchmarks of ``only`` (``gpu``: compute, HBM, attention, host copies; ``proxy``: the
    ring and loopback; ``peer``: NVLink, skipped below two GPUs); the raw measurements for
    :func:`mkernel.studies.profile.fit`."""
    import torch
    import torch.distributed as dist

    raw = {"meta": meta(commit, command)}
    if "peer" in only and torch.cuda.device_count() >= 2:
        from . import peer

        raw["peer"] = peer.run(progress)
    elif "peer" in only:
        if set(only) == {"peer"}:
            raise BackendUnavailable(f"calibrate --only peer measures NVLink between two GPUs; this host has "
                                     f"{torch.cuda.device_count()}")
        progress("calibrate: peer skipped (one GPU: the NVLink terms keep their estimates)")
    if "gpu" not in only and "proxy" not in only:
        return raw
    if not dist.is_initialized():  # the fused attention op runs on a world-1 group (the CLI set its rendezvous)
        dist.init_process_group("gloo", rank=0, world_size=1)
    if "gpu" in only:
        for name, fn in (("matmul", matmul), ("gemm_sms", gemm_sms), ("hbm", hbm), ("stream", stream),
                         ("attention", attention), ("extra", host_copies)):
            progress(f"calibrate: {name}")
            raw[name] = fn()
    if "proxy" in only:
        progress("calibrate: proxy")
        raw["proxy"], raw["loopback"] = proxy()
    from .. import api

    api.close()
    return raw
