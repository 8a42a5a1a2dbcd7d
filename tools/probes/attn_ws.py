"""The ceiling of attention in Triton 3.6 on this GPU with and without warp specialisation, beside the default SDPA.

Issue 26, item 3 asks for the fused attention tile at >= 85% of `F.scaled_dot_product_attention`
(default dispatch). The tile is FlashAttention-2 style: every warp loads, multiplies and rescales.
Triton 3.6 has a Hopper warp-specialisation pass (``tl.range(..., warp_specialize=True)``): compiled
with 4 warps per group, a standalone kernel becomes a producer warpgroup feeding two consumer
warpgroups through TMA and mbarriers (384 threads, ``setmaxnreg``), FlashAttention-3's structure.
Inside the fused kernel the same loop does not specialise (no ``setmaxnreg``, the kernel's 8 warps
stay 8: the pass needs the loop at the kernel's top level), so this probe measures what the
structure would be worth: one program per 128-row query tile, Q, K, V and O through TMA
descriptors, online softmax in log2 units; every variant checked against SDPA first.

    python3 tools/probes/attn_ws.py [--seqs 768,1536,3072,6144,12288] [--dims 128,64] [--out ws.json]
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
         STAGES: tl.constexpr, WS: tl.constexpr):
    tile, bh = tl.program_id(0), tl.program_id(1)
    base = bh.to(tl.int64) * S * D
    q_desc = tl.make_tensor_descriptor(q_ptr + base, shape=[S, D], strides=[D, 1], block_shape=[BQ, D])
    k_desc = tl.make_tensor_descriptor(k_ptr + base, shape=[S, D], strides=[D, 1], block_shape=[BKV, D])
    v_desc = tl.make_tensor_descriptor(v_ptr + base, shape=[S, D], strides=[D, 1], block_shape=[BKV, D])
    o_desc = tl.make_tensor_descriptor(o_ptr + base, shape=[S, D], strides=[D, 1], block_shape=[BQ, D])
    q = q_desc.load([tile * BQ, 0])
    qk_scale = sm_scale * 1.4426950408889634
    m_i = tl.full((BQ,), float("-inf"), tl.float32)
    l_i = tl.zeros((BQ,), tl.float32)
    acc = tl.zeros((BQ, D), tl.float32)
    for kb in tl.range(0, tl.cdiv(S, BKV), num_stages=STAGES, warp_specialize=WS):
        k = k_desc.load([kb * BKV, 0])
        v = v_desc.load([kb * BKV, 0])
        s = tl.dot(q, tl.trans(k))
        m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
        p = tl.exp2(s * qk_scale - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(tl.bfloat16), v, acc)
        m_i = m_new
    o_desc.store([tile * BQ, 0], (acc / l_i[:, None]).to(tl.bfloat16))


VARIANTS = [  # (warp specialised, warps per group, key block rows, stages)
    (False, 8, 64, 3), (False, 8, 128, 3), (True, 4, 64, 2), (True, 4, 128, 2), (True, 4, 128, 3)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqs", default="768,1536,3072,6144,12288")
    ap.add_argument("--dims", default="128,64")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    rows = []
    B, H = 4, 16
    for d in (int(x) for x in args.dims.split(",")):
        for s in (int(x) for x in args.seqs.split(",")):
            q, k, v = (torch.randn(B, H, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double())
            flops = 4 * B * H * s * s * d
            sdpa = do_bench_cudagraph(lambda: F.scaled_dot_product_attention(q, k, v), rep=100) * 1e3
            sdpa_err = float((F.scaled_dot_product_attention(q, k, v).double() - ref).norm() / ref.norm())
            print(f"D={d} S={s} SDPA default {sdpa:.1f} us ({flops / sdpa / 1e6:.0f} TFLOPS) err {sdpa_err:.1e}",
                  flush=True)
            rows.append({"d": d, "seq": s, "variant": "sdpa-default", "us": sdpa, "tflops": flops / sdpa / 1e6,
                         "rel_err": sdpa_err})
            for ws, warps, bkv, stages in VARIANTS:
                name = f"{'ws' if ws else 'plain'}-w{warps}-kv{bkv}-st{stages}"
                out = torch.full_like(q, float("nan"))

                def call():
                    _fwd[(s // 128, B * H)](q, k, v, out, s, d ** -0.5, D=d, BQ=128, BKV=bkv, STAGES=stages, WS=ws,
                                            num_warps=warps)
                try:
                    call()
                    torch.cuda.synchronize()
                    err = float((out.double() - ref).norm() / ref.norm())
                    us = do_bench_cudagraph(call, rep=100) * 1e3
                except Exception as e:  # a variant that does not compile or fit: say so, go on
                    print(f"D={d} S={s} {name}: {type(e).__name__}: {str(e)[:160]}", flush=True)
                    continue
                print(f"D={d} S={s} {name}: {us:.1f} us ({flops / us / 1e6:.0f} TFLOPS) / SDPA {sdpa / us:.3f} "
                      f"err {err:.1e}", flush=True)
                rows.append({"d": d, "seq": s, "variant": name, "us": us, "tflops": flops / us / 1e6,
                             "ratio_vs_sdpa": sdpa / us, "rel_err": err})
            if args.out:
                with open(args.out, "w") as f:
                    json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
