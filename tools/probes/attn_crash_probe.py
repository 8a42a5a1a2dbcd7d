"""Probe for the illegal instruction seen at S = 6144 (B = 4, 16 heads, D = 128) in tools/bench/bench_api.py:
the fused attention at world 1, eager with a sync after every call, then captured in a CUDA graph on
a side stream (as triton.testing.do_bench_cudagraph does), once through the launch's direct C path
and once through Triton's wrapper (a no-op launch hook forces it). Prints which step fails."""
import sys

import torch
import torch.distributed as dist

from mkernel.hw.runtime import safety

safety.apply_rendezvous("attn_crash_probe")
dist.init_process_group("gloo", rank=0, world_size=1)
import mkernel  # noqa: E402
from triton import knobs  # noqa: E402

path, s = sys.argv[1], int(sys.argv[2])
causal = len(sys.argv) > 3 and sys.argv[3] == "causal"
if path == "wrapper":
    knobs.runtime.launch_enter_hook.add(lambda *a, **k: None)
q, k, v = (torch.randn(4, 16, s, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for step in range(3):
    out, lse = mkernel.ring_attention(q, k, v, causal=causal, mode="fused")
    torch.cuda.synchronize()
    print(f"{path} S={s} causal={causal} eager call {step}: ok, nan={int(out.isnan().sum())}", flush=True)
for _ in range(50):
    mkernel.ring_attention(q, k, v, causal=causal, mode="fused")
torch.cuda.synchronize()
print(f"{path} S={s} 50 back-to-back calls: ok", flush=True)
side = torch.cuda.Stream()
with torch.cuda.stream(side):
    mkernel.ring_attention(q, k, v, causal=causal, mode="fused")
    torch.cuda.synchronize()
    print(f"{path} S={s} side-stream call: ok", flush=True)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(5):
            mkernel.ring_attention(q, k, v, causal=causal, mode="fused")
    torch.cuda.synchronize()
    print(f"{path} S={s} captured: ok", flush=True)
    g.replay()
    torch.cuda.synchronize()
    print(f"{path} S={s} replayed: ok", flush=True)
