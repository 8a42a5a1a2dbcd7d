"""The fused attention tile through the public op, beside torch's default SDPA, for the kernel's
key-block choices (``--bkv 64,128``: the BKV constexpr patched into :func:`fused.constexprs`).

Every row is checked on two heads against the float64 reference first; graph-timed
(do_bench_cudagraph) on the same inputs as SDPA. B = 4, 16 heads; D and S from the flags.

    python3 tools/probes/attn_fused.py --bkv 64,128 --seqs 768,3072,6144 --dims 128 --out fused.json
"""
from __future__ import annotations

import argparse
import json

from mkernel.hw.runtime import safety

safety.apply_rendezvous("attn_fused")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bkv", default="64,128")
    ap.add_argument("--seqs", default="768,1536,3072,6144,12288")
    ap.add_argument("--dims", default="128")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--out", default=None)
    ap.add_argument("--variant", default=None, help="a copy of hw/kernels/tiles.py whose _attn replaces the kernel's")
    ap.add_argument("--tag", default="")
    ap.add_argument("--tile-m", type=int, default=0, help="query rows per task (0: the op's own choice)")
    args = ap.parse_args()
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from triton.testing import do_bench_cudagraph

    dist.init_process_group("gloo", rank=0, world_size=1)
    import mkernel
    from mkernel.hw import fallbacks
    from mkernel.hw.kernels import fused

    if args.variant:  # before the first compile: Triton resolves the kernel's globals then
        import importlib.util
        spec = importlib.util.spec_from_file_location("variant_tiles", args.variant)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        fused._attn = mod._attn
    from mkernel.hw import ops
    if args.tile_m:
        import dataclasses
        workload = ops.attention_workload
        ops.attention_workload = lambda *a, **k: dataclasses.replace(workload(*a, **k), tile_m=args.tile_m)
    original = fused.constexprs
    rows = []
    for bkv in (int(x) for x in args.bkv.split(",")):
        fused.constexprs = lambda *a, _b=bkv, **k: {**original(*a, **k), "BKV": _b}
        for d in (int(x) for x in args.dims.split(",")):
            for s in (int(x) for x in args.seqs.split(",")):
                for causal in (bool(int(c)) for c in args.causal.split(",")):
                    q, k, v = (torch.randn(4, 16, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
                    out, lse = mkernel.ring_attention(q, k, v, causal=causal, mode="fused")
                    ref, ref_lse = fallbacks.reference_ring_attention(*(x[:1, :2] for x in (q, k, v)), causal=causal)
                    err = max(float((out[:1, :2].double() - ref).norm() / ref.norm()),
                              float((lse[:1, :2].double() - ref_lse).norm() / ref_lse.norm()))
                    compiled = next(iter(ops._EXECUTORS.values()))[1].launch._compiled
                    regs = (getattr(compiled, "n_regs", None), getattr(compiled, "n_spills", None))
                    ours = do_bench_cudagraph(lambda: mkernel.ring_attention(q, k, v, causal=causal, mode="fused"),
                                              rep=100) * 1e3
                    sdpa = do_bench_cudagraph(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                              rep=100) * 1e3
                    flops = 4.0 * 4 * 16 * s * s * d / (2 if causal else 1)
                    row = {"tag": args.tag, "tile_m": args.tile_m, "regs": regs[0], "spills": regs[1], "bkv": bkv, "d": d, "s": s, "causal": causal, "fused_us": ours, "sdpa_us": sdpa,
                           "ratio": sdpa / ours, "fused_tflops": flops / ours / 1e6,
                           "sdpa_tflops": flops / sdpa / 1e6, "rel_err": err}
                    rows.append(row)
                    print(f"{args.tag} regs={regs[0]} spills={regs[1]} BKV={bkv} D={d} S={s}{' causal' if causal else ''}: fused {ours:.1f} us "
                          f"({row['fused_tflops']:.0f} TFLOPS), SDPA {sdpa:.1f} us ({row['sdpa_tflops']:.0f}), "
                          f"ratio {row['ratio']:.3f}, err {err:.1e}", flush=True)
                    mkernel.close()
                    del q, k, v, out, lse
                    torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
