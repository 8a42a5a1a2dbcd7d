"""Which GEMM tile configuration reaches cuBLAS on the shapes where the fused kernel's 128 x 256 tile
falls short (K = 512, and shapes no tile divides): the standalone persistent GEMM (hw/kernels/gemm.py)
with each configuration, against torch.matmul in the same process, graph-timed.

    python tools/probes/gemm_tiles.py --out tiles.json
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

SHAPES = [(4096, 4096, 512), (8192, 8192, 512), (16384, 16384, 512), (5000, 3000, 7000), (3000, 5000, 1000),
          (12000, 9000, 2056)]
# (BM, BN, BK, GROUP_M, warps, stages, flatten)
CONFIGS = [(128, 256, 64, 8, 8, 3, False), (128, 256, 64, 8, 8, 3, True), (128, 256, 64, 8, 8, 4, True),
           (128, 128, 64, 8, 8, 4, False), (128, 128, 64, 8, 4, 4, True), (128, 128, 64, 8, 8, 5, True),
           (256, 128, 64, 8, 8, 3, True), (128, 128, 128, 8, 8, 3, True), (64, 256, 64, 8, 4, 4, True)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("tiles.json"))
    args = ap.parse_args()
    import torch
    from triton.testing import do_bench_cudagraph

    from mkernel.hw.kernels.gemm import Config, gemm

    rows = []
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) * k ** -0.5
        ref = a.double() @ b.double()
        torch_us = do_bench_cudagraph(lambda: a @ b, rep=100) * 1e3
        best = None
        for bm, bn, bk, g, warps, stages, flat in CONFIGS:
            c = Config(BM=bm, BN=bn, BK=bk, GROUP_M=g, num_warps=warps, num_stages=stages, flatten=flat)
            try:
                out = gemm(a, b, config=c)
                err = float((out.double() - ref).norm() / ref.norm())
                us = do_bench_cudagraph(lambda: gemm(a, b, config=c), rep=100) * 1e3
            except Exception as e:  # a configuration that needs too much shared memory: recorded, not fatal
                rows.append({"m": m, "n": n, "k": k, "config": [bm, bn, bk, g, warps, stages, flat], "error": str(e)[:200]})
                print(f"{m}x{n}x{k} {c}: {type(e).__name__} {str(e)[:100]}", flush=True)
                continue
            rows.append({"m": m, "n": n, "k": k, "config": [bm, bn, bk, g, warps, stages, flat], "us": us,
                         "torch_us": torch_us, "ratio": torch_us / us, "rel_err": err})
            best = max(best or 0.0, torch_us / us)
            print(f"{m:5d}x{n:5d}x{k:5d} BM{bm} BN{bn} BK{bk} w{warps} s{stages} flat={int(flat)}: {us:8.1f} us "
                  f"torch {torch_us:8.1f} ratio {torch_us / us:.3f} err {err:.1e}", flush=True)
        print(f"== {m}x{n}x{k}: best ratio {best}", flush=True)
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
