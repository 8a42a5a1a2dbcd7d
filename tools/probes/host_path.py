"""Where an eager fused call's host time goes, phase by phase, at world 1 on one GPU (issue 26).

Each phase is timed alone: p50 / p99 of 200 back-to-back repetitions, no sync between, beside the
whole public call and torch's own call in the same run. Phases: the input check, the binding (with
the output's torch.empty), torch.empty alone, the stream queries, the kernel launch alone (the
packed block, or Triton's launcher when packed launches are off), and the executor call. The other three ops: the whole public call
beside torch's (MoE: its torch path, gather + per-expert matmul).

    python tools/probes/host_path.py --out host_path.json
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np


def laps(fn, calls: int = 200) -> tuple[float, float]:
    import torch

    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    torch.cuda.synchronize()
    return float(np.percentile(out, 50) * 1e6), float(np.percentile(out, 99) * 1e6)


def phases(name: str, public, torch_fn, ex, inputs: dict) -> list[dict]:
    import torch

    public()
    ex(inputs)
    b, k = ex.binding, ex.kernel
    bound, key = b.bind(inputs, {})
    stream = torch._C._cuda_getCurrentRawStream(ex.device.index)
    shape, dtype = bound["OUT"].shape, bound["OUT"].dtype

    def launch_only():
        if not k.launch.cached(stream, key):
            k.launch(stream, key=key, **b.arguments(bound, key, False))

    def triton_launcher():
        k.launch(stream, **b.arguments(bound, key, False))

    rows = []
    for phase, fn in (("public call, fused", public), ("torch", torch_fn), ("executor call", lambda: ex(inputs)),
                      ("check", lambda: b.check(inputs)), ("bind (+ torch.empty)", lambda: b.bind(inputs, {})),
                      ("torch.empty of the output", lambda: torch.empty(shape, dtype=dtype, device=ex.device)),
                      ("capturing? + raw stream", lambda: (torch.cuda.is_current_stream_capturing(),
                                                           torch._C._cuda_getCurrentRawStream(ex.device.index))),
                      ("launch: packed block", launch_only), ("launch: triton's C launcher", triton_launcher)):
        p50, p99 = laps(fn)
        rows.append({"case": name, "phase": phase, "p50_us": p50, "p99_us": p99})
        print(f"{name:28s} {phase:30s} p50 {p50:6.1f} us  p99 {p99:6.1f} us", flush=True)
    return rows


def whole(name: str, public, torch_fn) -> list[dict]:
    rows = []
    for phase, fn in (("public call, fused", public), ("torch", torch_fn)):
        p50, p99 = laps(fn)
        rows.append({"case": name, "phase": phase, "p50_us": p50, "p99_us": p99})
        print(f"{name:28s} {phase:30s} p50 {p50:6.1f} us  p99 {p99:6.1f} us", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="host_path.json")
    args = ap.parse_args()
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    import mkernel
    from mkernel.hw import ops
    from mkernel.hw.runtime import safety
    from mkernel.problems import Workload

    safety.apply_rendezvous("host_path")
    dist.init_process_group("gloo", rank=0, world_size=1)
    rows = []
    a = torch.randn(4096, 512, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(512, 4096, device="cuda", dtype=torch.bfloat16)
    mkernel.gemm_ar(a, b, mode="fused")
    ex = ops.executor(Workload(kernel="gemm_ar", m=4096, n=4096, k=512), "", 1, 0)
    rows += phases("gemm_ar 4096x4096x512", lambda: mkernel.gemm_ar(a, b, mode="fused"), lambda: a @ b,
                   ex, {"A": a, "B": b})
    q, k, v = (torch.randn(4, 16, 768, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    mkernel.ring_attention(q, k, v, mode="fused")
    ex = ops.executor(ops.attention_workload(q, False), "", 1, 0)
    flat = {n: t.view(-1, 128) for n, t in zip("QKV", (q, k, v))}
    rows += phases("ring_attention 4x16x768x128", lambda: mkernel.ring_attention(q, k, v, mode="fused"),
                   lambda: F.scaled_dot_product_attention(q, k, v), ex, flat)
    for op in ("gemm_rs", "ag_gemm"):  # the other ops: the whole call beside torch's
        fn = getattr(mkernel, op)
        rows += whole(f"{op} 4096x4096x512", lambda fn=fn: fn(a, b, mode="fused"), lambda: a @ b)
    x = torch.randn(2048, 1024, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(8 * 1024, 512, device="cuda", dtype=torch.bfloat16)
    idx = torch.rand(2048, 8, device="cuda").topk(2, dim=1).indices  # two distinct experts per token
    fused_h, torch_h = (mkernel.moe_plan(idx, 8, 1024, 512, mode=m) for m in ("fused", "fallback"))
    rows += whole("moe 2048 tokens, 8 experts", lambda: mkernel.moe_dispatch_gemm(x, w, fused_h),
                  lambda: mkernel.moe_dispatch_gemm(x, w, torch_h))
    commit = Path(".commit").read_text().strip() if Path(".commit").exists() else "unknown"
    Path(args.out).write_text(json.dumps({"meta": {"date": time.strftime("%Y-%m-%d"), "commit": commit,
                                                   "gpu": torch.cuda.get_device_name(),
                                                   "command": "python tools/probes/host_path.py"}, "rows": rows},
                                         indent=1))
    mkernel.close()


if __name__ == "__main__":
    main()
