"""The public ops on one GPU at world 1, the way a user calls them, against torch in the same run.

Per op and shape it prints and records:
- **host us per eager call**: p50 and p99 over 200 back-to-back calls with no sync, for
  ``mode="auto"`` (what a user gets), ``mode="fused"`` and the torch call itself;
- **graph-timed kernel time**: CUDA-graph replays (triton.testing.do_bench_cudagraph) of the fused
  op and of the torch call, and their ratio (torch time / fused time: > 1 means fused faster);
- **which path auto took**, and ||out - ref|| / ||ref|| of the fused output against float64.

GEMMs: M = N in {4096, 8192, 16384} x K in {512, 1024, 2048, 8192}, plus shapes no tile divides,
against ``a @ b`` (cuBLAS). Attention: B = 4, 16 heads, D = 128 (and 64), S in {768, ..., 12288},
full and causal, against ``F.scaled_dot_product_attention`` with torch's default dispatch (the
backend it picked is recorded from the profiler's kernel names). MoE: the fused op against its
torch path (gather + per-expert matmul).

    python tools/bench/bench_api.py --out bench_api.json [--only gemm,attn,moe] [--quick]
"""
from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

GEMMS = [(m, m, k) for m in (4096, 8192, 16384) for k in (512, 1024, 2048, 8192)] + \
    [(5000, 3000, 7000), (3000, 5000, 1000), (12000, 9000, 2056)]
SEQS = (768, 1536, 3072, 6144, 12288)
HOST_CALLS = 200
SEQS_RUN = set(SEQS)  # --seqs narrows it
LSE_PATH = True  # --no-lse-path skips timing the torch path's attention with lse (cuDNN) in a graph


def _rel(out, ref) -> float:
    return float((out.double() - ref.double()).norm() / ref.double().norm())


def _graph_us(fn) -> float:
    from triton.testing import do_bench_cudagraph

    fn()
    return do_bench_cudagraph(fn, rep=100) * 1e3


def _host_us(fn, calls: int = HOST_CALLS) -> tuple[float, float]:
    """p50 and p99 of the host time of each of ``calls`` back-to-back calls (no sync between)."""
    import numpy as np
    import torch

    fn()
    torch.cuda.synchronize()
    laps = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        laps.append(time.perf_counter() - t)
    torch.cuda.synchronize()
    return float(np.percentile(laps, 50) * 1e6), float(np.percentile(laps, 99) * 1e6)


def _row(name: str, flops: float, fused, torch_fn, auto, path: str, err: float) -> dict:
    fused_us, torch_us = _graph_us(fused), _graph_us(torch_fn)
    # 200 calls where the GPU keeps up with them; fewer where each call holds it for milliseconds
    calls = HOST_CALLS if max(fused_us, torch_us) < 2000 else 30
    row = {"name": name, "path_auto": path, "rel_err": err, "fused_graph_us": fused_us, "torch_graph_us": torch_us,
           "ratio": torch_us / fused_us, "fused_tflops": flops / fused_us / 1e6, "torch_tflops": flops / torch_us / 1e6,
           "host_calls": calls}
    for label, fn in (("auto", auto), ("fused", fused), ("torch", torch_fn)):
        row[f"host_{label}_p50_us"], row[f"host_{label}_p99_us"] = _host_us(fn, calls)
    print(f"{name:34s} auto={path:8s} fused {fused_us:9.1f} us  torch {torch_us:9.1f} us  ratio {row['ratio']:.3f}  "
          f"host p50 auto/fused/torch {row['host_auto_p50_us']:.0f}/{row['host_fused_p50_us']:.0f}/"
          f"{row['host_torch_p50_us']:.0f} us  err {err:.1e}", flush=True)
    return row


def bench_gemm(rows: list, quick: bool) -> None:
    import torch

    import mkernel
    from mkernel.hw.kernels.gemm import gemm

    for m, n, k in (GEMMS[:2] + GEMMS[-1:] if quick else GEMMS):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) * k ** -0.5
        out = mkernel.gemm_ar(a, b, mode="fused")
        err = _rel(out, a.double() @ b.double())
        path = mkernel.explain("gemm_ar", a, b).path
        row = _row(f"gemm_ar {m}x{n}x{k}", 2.0 * m * n * k, lambda: mkernel.gemm_ar(a, b, mode="fused"),
                   lambda: a @ b, lambda: mkernel.gemm_ar(a, b), path, err)
        if n % 8 == 0 and k % 8 == 0:  # the standalone persistent GEMM: the matrix code alone, no plan
            row["standalone_graph_us"] = _graph_us(lambda: gemm(a, b))
        rows.append({"op": "gemm_ar", "m": m, "n": n, "k": k, **row})
        mkernel.close()
        del a, b, out
        torch.cuda.empty_cache()


def _sdpa_backend(q, causal: bool) -> str:
    import torch
    import torch.nn.functional as F

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        F.scaled_dot_product_attention(q, q, q, is_causal=causal)
        torch.cuda.synchronize()
    names = " ".join(e.name.lower() for e in prof.events())
    return next((b for b in ("cudnn", "flash", "efficient", "cutlass") if b in names), "math or unknown")


def bench_attention(rows: list, quick: bool) -> None:
    import torch
    import torch.nn.functional as F

    import mkernel
    from mkernel.hw import attention, fallbacks

    for d in (128, 64):
        for s in (SEQS[:1] + SEQS[-1:] if quick or d == 64 else SEQS):
            if s not in SEQS_RUN:
                continue
            for causal in (False, True):
                q, k, v = (torch.randn(4, 16, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
                out, lse = mkernel.ring_attention(q, k, v, causal=causal, mode="fused")
                # float64 scores of every head would not fit: check two heads (heads are independent)
                ref, ref_lse = fallbacks.reference_ring_attention(*(x[:1, :2] for x in (q, k, v)), causal=causal)
                err = max(_rel(out[:1, :2], ref), _rel(lse[:1, :2], ref_lse))
                path = mkernel.explain("ring_attention", q, k, v, causal=causal).path
                flops = 4.0 * 4 * 16 * s * s * d / (2 if causal else 1)
                row = _row(f"attention S={s} D={d}{' causal' if causal else ''}", flops,
                           lambda: mkernel.ring_attention(q, k, v, causal=causal, mode="fused"),
                           lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                           lambda: mkernel.ring_attention(q, k, v, causal=causal), path, err)
                row["sdpa_backend"] = _sdpa_backend(q, causal)
                if LSE_PATH:
                    row["torch_path_lse_graph_us"] = _graph_us(lambda: attention.attention_lse(q, k, v, causal))
                rows.append({"op": "ring_attention", "s": s, "d": d, "causal": causal, **row})
                mkernel.close()


def bench_moe(rows: list, quick: bool) -> None:
    import torch

    import mkernel

    experts, topk, hidden, width = 256, 8, 7168, 2048
    for tokens in (8192,) if quick else (8192, 16384):
        g = torch.Generator(device="cuda").manual_seed(tokens)
        idx = torch.stack([torch.randperm(experts, device="cuda", generator=g)[:topk] for _ in range(tokens)])
        x = torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(experts * hidden, width, device="cuda", dtype=torch.bfloat16) * hidden ** -0.5
        fused_h = mkernel.moe_plan(idx, experts, hidden, width, mode="fused")
        auto_h = mkernel.moe_plan(idx, experts, hidden, width)
        torch_h = mkernel.moe_plan(idx, experts, hidden, width, mode="fallback")
        ref = mkernel.moe_dispatch_gemm(x, w, torch_h)
        err = _rel(mkernel.moe_dispatch_gemm(x, w, fused_h), ref)
        rows.append({"op": "moe_dispatch_gemm", "tokens": tokens, **_row(
            f"moe T={tokens}", 2.0 * tokens * topk * hidden * width, lambda: mkernel.moe_dispatch_gemm(x, w, fused_h),
            lambda: mkernel.moe_dispatch_gemm(x, w, torch_h), lambda: mkernel.moe_dispatch_gemm(x, w, auto_h),
            auto_h.decision.path, err)})
        mkernel.close()


def bench_attention_tiles(rows: list, quick: bool) -> None:
    """The attention tile's key-block rows and pipeline depth (fused.constexprs' BKV, NUM_STAGES),
    fused against SDPA's default at D = 128: a tuning exploration, not a user knob."""
    import torch
    import torch.nn.functional as F

    import mkernel
    from mkernel.hw.kernels import fused

    constexprs, stages = fused.constexprs, fused.NUM_STAGES
    try:
        for bkv, depth in ((64, 3), (128, 2), (128, 3), (64, 4)):
            fused.constexprs = lambda *a, _b=bkv, **k: {**constexprs(*a, **k), "BKV": _b}
            fused.NUM_STAGES = depth
            for s in (768, 4096, 12288):
                q, k, v = (torch.randn(4, 16, s, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
                fused_us = _graph_us(lambda: mkernel.ring_attention(q, k, v, mode="fused"))
                sdpa_us = _graph_us(lambda: F.scaled_dot_product_attention(q, k, v))
                flops = 4.0 * 4 * 16 * s * s * 128
                rows.append({"op": "attention_tiles", "bkv": bkv, "stages": depth, "s": s, "fused_graph_us": fused_us,
                             "sdpa_graph_us": sdpa_us, "ratio": sdpa_us / fused_us,
                             "fused_tflops": flops / fused_us / 1e6})
                print(f"attention tile BKV={bkv} stages={depth} S={s}: fused {fused_us:.1f} us "
                      f"({flops / fused_us / 1e6:.0f} TFLOPS), SDPA {sdpa_us:.1f} us, ratio {sdpa_us / fused_us:.3f}",
                      flush=True)
                mkernel.close()
    finally:
        fused.constexprs, fused.NUM_STAGES = constexprs, stages


def profile_host(rows: list, quick: bool) -> None:
    """Where an eager fused call's host time goes: cProfile over 200 calls of gemm_ar 4096^2 x 512."""
    import cProfile
    import io
    import pstats

    import torch

    import mkernel

    a = torch.randn(4096, 512, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(512, 4096, device="cuda", dtype=torch.bfloat16)
    mkernel.gemm_ar(a, b, mode="fused")
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(200):
        mkernel.gemm_ar(a, b, mode="fused")
    prof.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(18)
    print(text.getvalue()[-3000:])
    rows.append({"op": "host_profile", "text": text.getvalue()})
    mkernel.close()


class _Saved(list):
    """Rows written to the output file as each one lands, so a run cut short keeps what it measured."""

    def __init__(self, path: Path, meta: dict):
        super().__init__()
        self.path, self.meta = path, meta

    def append(self, row) -> None:
        super().append(row)
        self.path.write_text(json.dumps({"meta": self.meta, "rows": list(self)}, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench_api.json")
    ap.add_argument("--only", default="gemm,attn,moe", help="any of gemm, attn, moe, tiles, profile")
    ap.add_argument("--quick", action="store_true", help="a few shapes per op (a smoke run)")
    ap.add_argument("--seqs", default=",".join(map(str, SEQS)), help="attention sequences to run")
    ap.add_argument("--no-lse-path", action="store_true", help="skip the torch path's attention-with-lse timing")
    args = ap.parse_args()
    global LSE_PATH
    SEQS_RUN.intersection_update(int(x) for x in args.seqs.split(","))
    LSE_PATH = not args.no_lse_path
    import torch
    import torch.distributed as dist
    import triton

    from mkernel.hw.runtime import safety

    safety.apply_rendezvous("bench_api")
    dist.init_process_group("gloo", rank=0, world_size=1)  # the fused path's symmetric memory needs a group
    commit = Path(".commit").read_text().strip() if Path(".commit").exists() else "unknown"
    meta = {"date": time.strftime("%Y-%m-%d"), "commit": commit, "gpu": torch.cuda.get_device_name(),
            "torch": torch.__version__, "triton": triton.__version__, "host": platform.node(),
            "command": "python tools/bench/bench_api.py " + " ".join(f"--{k} {v}" for k, v in vars(args).items())}
    rows = _Saved(Path(args.out), meta)
    for part, fn in (("profile", profile_host), ("gemm", bench_gemm), ("attn", bench_attention), ("moe", bench_moe),
                     ("tiles", bench_attention_tiles)):
        if part in args.only.split(","):
            fn(rows, args.quick)
            Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
