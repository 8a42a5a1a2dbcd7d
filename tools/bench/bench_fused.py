"""The fused kernel on one H200 at world 1, against torch in the same process.

What it measures (issue 6's single-GPU figures):
- **role overhead / compute role**: fused GEMM ops at world 1 (the plan's GEMM tiles walked by the
  persistent interpreter, host-built TMA descriptors) against torch.matmul on the same shape;
- **attention tile**: fused ring attention at world 1 (every tile of the own slice), full and
  causal, against torch scaled_dot_product_attention with the flash backend (``is_causal`` for the
  causal rows: at world 1 the zigzag order is the natural one), B x heads = 64, D = 128; with
  ``--attn-tiles 64x3,128x2`` once per key-block size x pipeline depth (a tuning exploration: the
  kernel's defaults are ``fused.constexprs`` and ``fused.NUM_STAGES``);
- **MoE grouped GEMM**: the compute role's expert tiles alone (the MoE schedule's GEMM tasks with the
  expert inputs already gathered) against the sum of per-expert torch.matmul, and the whole fused
  MoE op at world 1 (dispatch gathers included) against index_select + per-expert matmul.

Shapes are the per-GPU shapes of the reference grid (mkernel-design.md section 8). Every timing is a
CUDA-graph replay (triton.testing.do_bench_cudagraph) of a call whose outputs were checked first
against torch in float32 (||out - ref|| / ||ref||).

    python tools/bench/bench_fused.py --out fused.json [--only gemm,attn,moe] [--attn-tiles 64x3,128x2]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

GEMMS = {  # name: (kernel, m, n, k) -> the world-1 op runs C[m, n] = A[m, k] @ B[k, n]
    "square 8192 (gemm_ar)": ("gemm_ar", 8192, 8192, 8192),
    "gemm_ar M=8192 (K_local 512)": ("gemm_ar", 8192, 8192, 512),
    "gemm_rs M=16384 (K_local 1024)": ("gemm_rs", 16384, 16384, 1024),
    "gemm_ar M=32768 (K_local 2048)": ("gemm_ar", 32768, 32768, 2048),
    "ag_gemm M=8192 (N_local 512)": ("ag_gemm", 8192, 512, 8192),
    "ag_gemm M=16384 (N_local 1024)": ("ag_gemm", 16384, 1024, 16384),
}
ATTN_SEQS = (768, 1536, 3072, 6144, 12288)
MOE_TOKENS = (8192, 16384)


def _init_group() -> None:
    import torch.distributed as dist

    from mkernel.hw.runtime import safety

    if not dist.is_initialized():
        safety.apply_rendezvous("bench_fused")
        dist.init_process_group("gloo", rank=0, world_size=1)


def _executor(schedule):
    from mkernel.hw.runtime.context import Context
    from mkernel.hw.runtime.executor import Executor

    ctx = Context(None, gpus_per_node=1, send_bytes=0, **Executor.context_sizes(schedule))
    return ctx, Executor(schedule, ctx)


def _bench(fn) -> float:
    from triton.testing import do_bench_cudagraph

    fn()
    return do_bench_cudagraph(fn, rep=200) * 1e-3


def _rel(out, ref) -> float:
    return ((out.float() - ref.float()).norm() / ref.float().norm()).item()


def bench_gemm(rows: list) -> None:
    import torch

    from mkernel import Cluster, Workload, builders

    for name, (kernel, m, n, k) in GEMMS.items():
        w = Workload(kernel=kernel, m=m, n=n, k=k)
        s = builders.get(kernel).build(w, Cluster("h200", 1, 1))
        ctx, op = _executor(s)
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        out = {"OUT": torch.empty(m, n, device="cuda", dtype=torch.bfloat16)}
        res = op({"A": a, "B": b}, out, poison=True)
        op.check()
        err = _rel(res["OUT"], a.float() @ b.float())
        t_ours = _bench(lambda: op({"A": a, "B": b}, out))
        t_ref = _bench(lambda: torch.matmul(a, b))
        op.check()
        flops = 2.0 * m * n * k
        rows.append({"what": "gemm", "name": name, "rel_err": err, "ours_s": t_ours, "baseline": "torch.matmul",
                     "baseline_s": t_ref, "ours_tflops": flops / t_ours / 1e12, "baseline_tflops": flops / t_ref / 1e12,
                     "ratio": t_ref / t_ours})
        ctx.close()


def bench_attention(rows: list, tag: str = "") -> None:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from mkernel import Cluster, Workload, builders

    B, H, D = 4, 16, 128
    for S in ATTN_SEQS:
        for causal in (0, 1):
            w = Workload(kernel="ring_attention", m=S, n=B * H, k=D, tile_m=128, causal=causal)
            s = builders.get("ring_attention").build(w, Cluster("h200", 1, 1))
            ctx, op = _executor(s)
            q, k, v = (torch.randn(B * H * S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            out = {"OUT": torch.empty(B * H * S, D, device="cuda", dtype=torch.bfloat16),
                   "LSE": torch.empty(B * H * S, 1, device="cuda", dtype=torch.float32)}
            res = op({"Q": q, "K": k, "V": v}, out, poison=True)
            op.check()
            q4, k4, v4 = (x.view(B, H, S, D) for x in (q, k, v))
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                ref = F.scaled_dot_product_attention(q4, k4, v4, is_causal=bool(causal))
                err = _rel(res["OUT"].view(B, H, S, D), ref)
                t_ref = _bench(lambda: F.scaled_dot_product_attention(q4, k4, v4, is_causal=bool(causal)))
            t_ours = _bench(lambda: op({"Q": q, "K": k, "V": v}, out))
            op.check()
            flops = 4.0 * B * H * S * S * D / (2 if causal else 1)
            name = f"S={S}{' causal' if causal else ''}{tag}"
            rows.append({"what": "attention", "name": name, "rel_err": err, "ours_s": t_ours,
                         "baseline": "sdpa flash", "baseline_s": t_ref, "ours_tflops": flops / t_ours / 1e12,
                         "baseline_tflops": flops / t_ref / 1e12, "ratio": t_ref / t_ours})
            ctx.close()


def bench_attention_tiles(rows: list, variants: str) -> None:
    """bench_attention once per ``BKVxSTAGES`` variant (each compiles its own kernel)."""
    from mkernel.hw.kernels import fused

    constexprs, stages = fused.constexprs, fused.NUM_STAGES
    try:
        for variant in variants.split(","):
            bkv, depth = (int(x) for x in variant.split("x"))
            fused.constexprs = lambda *a, _b=bkv, **k: {**constexprs(*a, **k), "BKV": _b}
            fused.NUM_STAGES = depth
            try:
                bench_attention(rows, f" kv{bkv} st{depth}")
            except Exception as e:  # noqa: BLE001 - one variant may not fit shared memory
                rows.append({"what": "attention", "failed": f"{variant}: {repr(e)[-300:]}"})
    finally:
        fused.constexprs, fused.NUM_STAGES = constexprs, stages


def _grouped_gemm_only(s):
    """The MoE schedule's expert GEMM tiles alone, with the expert inputs (XE) given: the compute
    role's grouped GEMM without the dispatch it waits for."""
    from mkernel.ir import BufferKind, Launch, Op, Role

    tasks = [dataclasses.replace(t, waits=(), signals=()) for t in s.tasks if t.op is Op.GEMM]
    tasks = tuple(dataclasses.replace(t, id=i) for i, t in enumerate(tasks))
    bufs = tuple(dataclasses.replace(b, kind=BufferKind.INPUT) if b.name == "XE" else b for b in s.buffers
                 if b.name in ("XE", "W", "Y"))
    return dataclasses.replace(s, tasks=tasks, buffers=bufs, launches=(Launch("grouped", ((Role.COMPUTE, s.num_sms),)),))


def bench_moe(rows: list) -> None:
    import torch

    from mkernel import Cluster, Workload, builders
    from mkernel.ir import Role

    for T in MOE_TOKENS:
        w = Workload(kernel="moe_dispatch_gemm", m=T, n=2048, k=7168, experts=256, topk=8,
                     sms=((Role.INTRA, 16),))
        c = Cluster("h200", 1, 1)
        fused = builders.get("moe_dispatch_gemm").build(w, c)
        g = _grouped_gemm_only(fused)
        ctx, op = _executor(g)
        xe_rows, y_rows = g.buffer("XE").rows, g.buffer("Y").rows
        xe = torch.randn(xe_rows, w.k, device="cuda", dtype=torch.bfloat16)
        wt = (torch.randn(w.experts * w.k, w.n, device="cuda", dtype=torch.bfloat16) / w.k ** 0.5).to(torch.bfloat16)
        out = {"Y": torch.zeros(y_rows, w.n, device="cuda", dtype=torch.bfloat16)}
        res = op({"XE": xe, "W": wt}, out)
        op.check()
        segs = _segments(g)
        ref = torch.zeros_like(res["Y"], dtype=torch.float32)
        for (r0, r1), e in segs:
            ref[r0:r1] = xe[r0:r1].float() @ wt[e * w.k:(e + 1) * w.k].float()
        err = _rel(res["Y"][:segs[-1][0][1]], ref[:segs[-1][0][1]])
        wv = [wt[e * w.k:(e + 1) * w.k] for _, e in segs]
        xv = [xe[r0:r1] for (r0, r1), _ in segs]

        def per_expert():
            for x, wgt in zip(xv, wv):
                torch.matmul(x, wgt)

        t_ours = _bench(lambda: op({"XE": xe, "W": wt}, out))
        t_ref = _bench(per_expert)
        flops = 2.0 * sum(r1 - r0 for (r0, r1), _ in segs) * w.k * w.n
        rows.append({"what": "moe grouped gemm", "name": f"T={T} top8 256 experts", "rel_err": err, "ours_s": t_ours,
                     "baseline": "per-expert torch.matmul", "baseline_s": t_ref, "ours_tflops": flops / t_ours / 1e12,
                     "baseline_tflops": flops / t_ref / 1e12, "ratio": t_ref / t_ours})
        ctx.close()


def _segments(s):
    """((row0, row1), expert) of each expert's rows in XE, from the GEMM tiles' regions."""
    seen = {}
    for t in s.tasks:
        a, b = t.reads
        e = b.row0 // (b.row1 - b.row0)
        lo, hi = seen.get(e, (a.row0, a.row1))
        seen[e] = (min(lo, a.row0), max(hi, a.row1))
    return sorted(((r, e) for e, r in seen.items()), key=lambda x: x[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--only", default="gemm,attn,moe")
    ap.add_argument("--attn-tiles", default="", help="BKVxSTAGES variants of the attention part, e.g. 64x3,128x2")
    args = ap.parse_args()
    from mkernel.hw.runtime import safety

    safety.apply_no_multicast()
    import torch

    _init_group()
    commit = Path(".commit").read_text().strip() if Path(".commit").is_file() else "unknown"
    rows: list = []
    t0 = time.time()
    attn = (lambda r: bench_attention_tiles(r, args.attn_tiles)) if args.attn_tiles else bench_attention
    for part, fn in (("gemm", bench_gemm), ("attn", attn), ("moe", bench_moe)):
        if part in args.only.split(","):
            try:
                fn(rows)
            except Exception as e:  # noqa: BLE001 - keep what the other parts measured
                rows.append({"what": part, "failed": repr(e)[-1500:]})
    print(f"{'what':18} {'shape':32} {'rel err':>8} {'ours TF':>8} {'base TF':>8} {'ours/base':>9}  baseline")
    for r in rows:
        if "failed" in r:
            print(f"{r['what']:18} FAILED {r['failed']}")
            continue
        print(f"{r['what']:18} {r['name']:32} {r['rel_err']:8.1e} {r['ours_tflops']:8.1f} {r['baseline_tflops']:8.1f} "
              f"{r['ratio']:9.3f}  {r['baseline']}")
    meta = {"date": time.strftime("%Y-%m-%d"), "commit": commit, "gpu": torch.cuda.get_device_name(),
            "torch": torch.__version__, "command": "python tools/bench/bench_fused.py", "wall_s": time.time() - t0}
    if args.out:
        args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
