"""The compute role alone on one GPU, against torch.matmul (cuBLAS) in the same process.

For each shape: torch.matmul, our persistent TMA GEMM on all SMs, and the same GEMM waiting on a
ready flag per tile row block with every flag already set (the cost of the waits themselves). Times
are CUDA-graph replays (triton.testing.do_bench_cudagraph), so Python launch cost is not counted for
either side.
Shapes: 8192^3 and the per-GPU GEMMs of the reference grid (mkernel-design.md section 8, world 16).
Targets (issue 6): >= 95% of torch.matmul TFLOPS; flag waits cost <= 3%.

    python tools/bench/bench_compute.py --out compute.json
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

SHAPES = {  # name: (M, N, K) of C[M, N] = A[M, K] @ B[K, N]
    "square 8192": (8192, 8192, 8192),
    "ag_gemm M=8192": (8192, 512, 8192),
    "ag_gemm M=16384": (16384, 1024, 16384),
    "ag_gemm M=32768": (32768, 2048, 32768),
    "gemm_rs/ar M=8192": (8192, 8192, 512),
    "gemm_rs/ar M=16384": (16384, 16384, 1024),
    "gemm_rs/ar M=32768": (32768, 32768, 2048),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--commit", default=None, help="the commit measured (default: the .commit file)")
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES), help="names from SHAPES")
    args = ap.parse_args()
    if args.commit is None and Path(".commit").is_file():  # written by the caller: a device copy has no history
        args.commit = Path(".commit").read_text().strip()
    import torch
    from triton.testing import do_bench_cudagraph

    def do_bench(fn, warmup=0, rep=100):  # CUDA-graph replays: kernel time without Python launch gaps
        fn()
        return do_bench_cudagraph(fn, rep=rep)

    from mkernel.hw.kernels import gemm
    from mkernel.hw.runtime import safety

    safety.apply_no_multicast()
    rows, raw = [], {}
    for name in args.shapes:
        M, N, K = SHAPES[name]
        torch.manual_seed(0)
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        flags = torch.ones(triton_cdiv(M, min(c.BM for c in gemm.CONFIGS)), dtype=torch.int64, device="cuda")
        gemm.gemm(a, b, out)
        ref = a.float() @ b.float()
        rel = ((out.float() - ref).norm() / ref.norm()).item()
        nan = bool(out.isnan().any().item())
        del ref
        flops = 2 * M * N * K
        tflops = lambda ms: flops / (ms * 1e-3) / 1e12  # noqa: E731
        chosen = gemm.choose(M, N, K, torch.cuda.get_device_properties(0).multi_processor_count)
        t_torch = do_bench(lambda: torch.matmul(a, b), warmup=50, rep=300)
        t_ours = do_bench(lambda: gemm.gemm(a, b, out, config=chosen), warmup=50, rep=300)
        t_wait = do_bench(lambda: gemm.gemm(a, b, out, flags=flags, epoch=1, config=chosen), warmup=50, rep=300)
        variants = {}
        for base in gemm.CONFIGS:
            for flat in (False, True):
                c = dataclasses.replace(base, flatten=flat)
                variants[f"{c.BM}x{c.BN}{' flat' if flat else ''}"] = tflops(
                    do_bench(lambda: gemm.gemm(a, b, out, config=c), warmup=25, rep=150))
        best = max(variants, key=variants.get)
        tf = {"torch": tflops(t_torch), "ours": tflops(t_ours), "wait": tflops(t_wait)}
        raw[name] = {"shape": [M, N, K], "ms": [t_torch, t_ours, t_wait], "tflops": tf, "variants": variants,
                     "chosen": dataclasses.asdict(chosen), "rel_err_vs_fp32": rel, "nan": nan}
        rows.append((name, f"{tf['torch']:.0f}", f"{tf['ours']:.0f}", f"{tf['ours'] / tf['torch']:.3f}",
                     f"{tf['wait']:.0f}", f"{1 - tf['wait'] / tf['ours']:+.3f}", f"{best} {variants[best]:.0f}",
                     f"{rel:.1e}"))
        torch.cuda.empty_cache()
    meta = {"date": time.strftime("%Y-%m-%d"), "gpu": torch.cuda.get_device_name(), "commit": args.commit,
            "configs": [dataclasses.asdict(c) for c in gemm.CONFIGS]}
    if args.out:
        args.out.write_text(json.dumps({"meta": meta, "results": raw}, indent=1))
    print(f"# compute role vs torch.matmul on {meta['gpu']} ({meta['date']}), bf16 TFLOP/s")
    head = ("shape", "torch", "ours", "ours/torch", "ours+waits", "wait cost", "best variant", "rel err")
    for row in (head, *rows):
        print(" | ".join(f"{c:<20}" if i == 0 else f"{c:>10}" if i != 6 else f"{c:>18}" for i, c in enumerate(row)))


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


if __name__ == "__main__":
    main()
