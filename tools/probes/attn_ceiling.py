"""What a plain Triton 3.6 attention forward reaches on this GPU, beside torch's default SDPA.

The fused kernel's attention tile runs at 0.48-0.69 of `F.scaled_dot_product_attention` (default
dispatch). Before changing the tile, this probe measures the ceiling of the same algorithm written as
a standalone kernel (one program per 128-row query tile, all keys, online softmax in log2 units), over
the choices the tile could make: K/V loaded through pointers (as the tile does) or through device-side
TMA descriptors, key blocks of 64 or 128 rows, 2-4 pipeline stages. Every variant is checked against
SDPA first (relative error printed). B = 4, 16 heads, D = 128, non-causal; graph-timed.

    python3 tools/probes/attn_ceiling.py [--seqs 3072,6144] [--out ceiling.json]
"""
from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.testing import do_bench_cudagraph


@triton.jit
def _fwd(q_ptr, k_ptr, v_ptr, o_ptr, S, sm_scale, D: tl.constexpr, BQ: tl.constexpr, BKV: tl.constexpr,
         TMA: tl.constexpr, STAGES: tl.constexpr):
    tile, bh = tl.program_id(0), tl.program_id(1)
    base = bh.to(tl.int64) * S * D
    rq = tile * BQ + tl.arange(0, BQ)
    d = tl.arange(0, D)
    q = tl.load(q_ptr + base + rq[:, None] * D + d[None, :])
    qk_scale = sm_scale * 1.4426950408889634
    m_i = tl.full((BQ,), float("-inf"), tl.float32)
    l_i = tl.zeros((BQ,), tl.float32)
    acc = tl.zeros((BQ, D), tl.float32)
    if TMA:
        k_desc = tl.make_tensor_descriptor(k_ptr + base, shape=[S, D], strides=[D, 1], block_shape=[BKV, D])
        v_desc = tl.make_tensor_descriptor(v_ptr + base, shape=[S, D], strides=[D, 1], block_shape=[BKV, D])
    for kb in tl.range(0, tl.cdiv(S, BKV), num_stages=STAGES):
        if TMA:
            k = k_desc.load([kb * BKV, 0])
            v = v_desc.load([kb * BKV, 0])
        else:
            rn = kb * BKV + tl.arange(0, BKV)
            k = tl.load(k_ptr + base + rn[:, None] * D + d[None, :])
            v = tl.load(v_ptr + base + rn[:, None] * D + d[None, :])
        s = tl.dot(q, tl.trans(k))
        m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
        p = tl.exp2(s * qk_scale - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(tl.bfloat16), v, acc * alpha[:, None])
        m_i = m_new
    tl.store(o_ptr + base + rq[:, None] * D + d[None, :], (acc / l_i[:, None]).to(tl.bfloat16))


def _alloc(size: int, align: int, stream):
    return torch.empty(size, dtype=torch.int8, device="cuda")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqs", default="3072,6144")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    triton.set_allocator(_alloc)
    rows = []
    B, H, D = 4, 16, 128
    for s in (int(x) for x in args.seqs.split(",")):
        q, k, v = (torch.randn(B, H, s, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        ref = F.scaled_dot_product_attention(q, k, v)
        flops = 4 * B * H * s * s * D
        sdpa = do_bench_cudagraph(lambda: F.scaled_dot_product_attention(q, k, v), rep=100) * 1e3
        print(f"S={s} SDPA default {sdpa:.1f} us ({flops / sdpa / 1e6:.0f} TFLOPS)", flush=True)
        rows.append({"seq": s, "variant": "sdpa-default", "us": sdpa, "tflops": flops / sdpa / 1e6})
        for tma in (False, True):
            for bkv in (64, 128):
                for stages in (2, 3, 4):
                    for warps in (8,):
                        out = torch.full_like(q, float("nan"))
                        def call():
                            _fwd[(s // 128, B * H)](q, k, v, out, s, D ** -0.5, D=D, BQ=128, BKV=bkv, TMA=tma,
                                                    STAGES=stages, num_warps=warps)
                        name = f"{'tma' if tma else 'ptr'}-kv{bkv}-st{stages}-w{warps}"
                        try:
                            call()
                            torch.cuda.synchronize()
                            err = float((out.double() - ref.double()).norm() / ref.double().norm())
                            us = do_bench_cudagraph(call, rep=100) * 1e3
                        except Exception as e:  # a variant that does not compile or fit: say so, go on
                            print(f"S={s} {name}: {type(e).__name__}: {str(e)[:120]}", flush=True)
                            continue
                        print(f"S={s} {name}: {us:.1f} us ({flops / us / 1e6:.0f} TFLOPS) ratio {sdpa / us:.3f} "
                              f"err {err:.1e}", flush=True)
                        rows.append({"seq": s, "variant": name, "us": us, "tflops": flops / us / 1e6,
                                     "ratio_vs_sdpa": sdpa / us, "rel_err": err})
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
