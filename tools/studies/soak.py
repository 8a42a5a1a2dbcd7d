"""Soak of the public ops: many calls through ``torch.ops.mkernel.*`` at world 1 and on the emulated
2 x 2 cluster, every output checked against the float64 oracle, memory, open files and threads
sampled along the way and judged flat.

Each call draws an op (all five), a path of the dispatch rule (the fused kernel through
``torch.ops.mkernel.<op>``, or the torch path through ``torch.ops.mkernel.torch_gemm`` /
``torch_ring_attention``, and for MoE a handle planned for each path) and a shape from a set with odd
sizes, then fresh random inputs. Outputs are compared with ``mkernel.hw.fallbacks.reference_*``
(float64, ||out - ref|| / ||ref|| <= 1e-2, a NaN fails); the worst error per (op, path) stays on the
GPU, so no call waits for the host. Every rank draws the same sequence; every 50 calls rank 0
decides for all whether the call or time budget is spent, so all ranks stop at the same call.

    python tools/studies/soak.py --calls 10000 --minutes 4 --out soak.json      # one device call, ~5-6 min
    python tools/studies/soak.py --calls 200 --worlds 1                         # a quick look at world 1

``--minutes`` bounds the checked calls of both worlds together (a third to world 1); set-up (the
first calls compile the kernels and build one executor per op and shape) comes on top, about a
minute. Exit 0 when every call matched and memory, files and threads stayed flat, else 1.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

from mkernel.reference import BF16_RTOL

TOLERANCE = BF16_RTOL  # the strict bf16 criterion, against the float64 oracle
CHECK_EVERY = 50  # calls between the ranks' agreement to go on
SAMPLE_EVERY = 1000  # calls between memory / files / threads samples
RSS_SLACK = 64 << 20  # host memory a flat run may still gain (allocator pools, Python caches)
ALLOCATED_SLACK = 1 << 20  # GPU memory likewise (caching-allocator rounding)
PATHS = ("fused", "torch")
# per op, shapes with odd sizes the fused kernel takes (K and N multiples of 8; gemm_rs's M splits
# over 4 ranks): gemm (m, n, k); ag_gemm (rows per rank, n, k); attention (B, H, S, D); MoE (tokens
# per rank, hidden, width, experts, topk)
SHAPES = {
    "gemm_ar": [(300, 520, 72), (1000, 776, 328), (517, 136, 64)],
    "gemm_rs": [(320, 520, 72), (1000, 776, 328), (68, 264, 40)],
    "ag_gemm": [(100, 264, 40), (75, 520, 72), (250, 136, 328)],
    "ring_attention": [(1, 2, 128, 64), (2, 3, 200, 64), (1, 4, 96, 128)],
    "moe_dispatch_gemm": [(64, 136, 264, 8, 2), (100, 72, 520, 16, 4), (37, 64, 136, 8, 1)],
}


def draws(seed: int, calls: int, shapes_per_op: int) -> list[tuple[str, str, int, bool]]:
    """(op, path, shape index, causal) of every call, the same on every rank."""
    rng = random.Random(seed)
    ops = sorted(SHAPES)
    return [(op, rng.choice(PATHS), rng.randrange(min(shapes_per_op, len(SHAPES[op]))), rng.random() < 0.5)
            for op in (rng.choice(ops) for _ in range(calls))]


def _sample() -> dict:
    import os
    import threading

    import torch

    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return {"allocated": torch.cuda.memory_allocated(), "rss": pages * os.sysconf("SC_PAGE_SIZE"),
            "fds": len(os.listdir("/proc/self/fd")), "threads": len(os.listdir("/proc/self/task")),
            "py_threads": threading.active_count()}


def soak_rank(info, gpus_per_node: int, calls: int, seconds: float, seed: int, shapes_per_op: int) -> dict:
    """One rank of the soak (launched by :func:`mkernel.hw.runtime.emulate.launch`)."""
    import math

    import torch
    import torch.distributed as dist

    from mkernel.errors import MkernelError
    from mkernel.hw import api
    from mkernel.hw import fallbacks as refs

    world, sms = info.world, info.sm_budget
    g = torch.Generator(device="cuda").manual_seed(seed * 7919 + info.rank)
    bf = {"device": "cuda", "dtype": torch.bfloat16}

    def rnd(*shape, scale=1.0):
        return torch.randn(*shape, generator=g, **bf) * scale

    handles = {}  # (shape index, path) -> MoE handle, planned once per routing (collective)
    for i, (tokens, hidden, width, experts, topk) in enumerate(SHAPES["moe_dispatch_gemm"][:shapes_per_op]):
        routes = torch.stack([torch.randperm(experts, device="cuda", generator=g)[:topk] for _ in range(tokens)])
        for path in PATHS:
            handles[(i, path)] = api.moe_plan(routes, experts, hidden, width, gpus_per_node=gpus_per_node, sms=sms,
                                              mode="fused" if path == "fused" else "fallback")

    def call(op: str, path: str, i: int, causal: bool):
        """(output, reference) pairs of one call on fresh inputs."""
        shape = SHAPES[op][i]
        if op == "moe_dispatch_gemm":
            tokens, hidden, width, experts, _ = shape
            h = handles[(i, path)]
            x, w = rnd(tokens, hidden), rnd(experts // world * hidden, width, scale=hidden ** -0.5)
            y = torch.ops.mkernel.moe_dispatch_gemm(x, w, h.id) if path == "fused" else api.moe_dispatch_gemm(x, w, h)
            return [(y, refs.reference_moe(x, w, h.torch_rows))]
        if op == "ring_attention":
            q, k, v = (rnd(*shape) for _ in range(3))
            args = (causal, "", gpus_per_node, sms, "fused" if path == "fused" else "fallback")
            fn = torch.ops.mkernel.ring_attention if path == "fused" else torch.ops.mkernel.torch_ring_attention
            out, lse = fn(q, k, v, *args)
            want, want_lse = refs.reference_ring_attention(q, k, v, causal=causal)
            return [(out, want), (lse, want_lse)]
        m, n, k = shape
        a, b = rnd(m, k), rnd(k, n, scale=k ** -0.5)
        if path == "fused":
            out = getattr(torch.ops.mkernel, op)(a, b, "", gpus_per_node, sms, "fused")
        else:
            out = torch.ops.mkernel.torch_gemm(a, b, op, "", gpus_per_node, sms, "fallback")
        return [(out, getattr(refs, f"reference_{op}")(a, b))]

    plan = draws(seed, calls, shapes_per_op)
    worst: dict[str, torch.Tensor] = {}
    counts: dict[str, int] = {}

    def checked(op, path, i, causal) -> None:
        name = f"{op}{'_causal' if causal and op == 'ring_attention' else ''}/{path}"
        for got, ref in call(op, path, i, causal):
            err = (got.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)
            worst[name] = torch.maximum(worst.get(name, torch.zeros((), device="cuda", dtype=torch.float64)), err)
        counts[name] = counts.get(name, 0) + 1

    t0 = time.monotonic()
    for op in sorted(SHAPES):  # set-up: every executor and kernel compiled before the first sample
        for path in PATHS:
            for i in range(min(shapes_per_op, len(SHAPES[op]))):
                for causal in (False, True) if op == "ring_attention" else (False,):
                    checked(op, path, i, causal)
    torch.cuda.synchronize()
    setup_s = time.monotonic() - t0
    dist.barrier()
    samples = [_sample()]
    start, done = time.monotonic(), 0
    go = torch.ones(1)
    for done, (op, path, i, causal) in enumerate(plan, 1):
        checked(op, path, i, causal)
        if done % SAMPLE_EVERY == 0:
            samples.append(_sample())
        if done % CHECK_EVERY == 0:
            go[0] = float(time.monotonic() - start < seconds) if info.rank == 0 else 0.0
            dist.broadcast(go, 0)
            if not go[0]:
                break
    torch.cuda.synchronize()
    loop_s = time.monotonic() - start
    samples.append(_sample())
    failure = None
    try:
        api.check()
    except MkernelError as exc:
        failure = str(exc)
    errors = {name: (float("inf") if math.isnan(e.item()) else e.item()) for name, e in worst.items()}
    api.close()
    first, last = samples[0], samples[-1]
    flat = {"allocated": last["allocated"] <= first["allocated"] + ALLOCATED_SLACK,
            "rss": last["rss"] <= first["rss"] + RSS_SLACK, "fds": last["fds"] <= first["fds"],
            "threads": last["threads"] <= first["threads"]}
    return {"rank": info.rank, "world": world, "calls": done, "setup_s": setup_s, "loop_s": loop_s,
            "calls_per_s": done / loop_s if loop_s else None, "counts": counts, "worst_error": errors,
            "samples": samples, "flat": flat, "device_error": failure,
            "ok": failure is None and all(flat.values()) and all(e <= TOLERANCE for e in errors.values())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=10_000, help="checked calls per world at most")
    ap.add_argument("--minutes", type=float, default=4.0, help="checked calls of both worlds together stop after "
                                                                "this long (a third to world 1)")
    ap.add_argument("--worlds", default="1,2x2", help="comma-separated: 1 (one GPU) and/or NODESxGPUS (emulated)")
    ap.add_argument("--shapes-per-op", type=int, default=2, help="shapes of each op's set in play (each one "
                                                                 "executor per path)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, help="write every rank's figures here (JSON)")
    a = ap.parse_args()
    worlds = []
    for spec in a.worlds.split(","):
        nodes, _, gpn = spec.partition("x")
        try:
            worlds.append((int(nodes), int(gpn)) if gpn else (1, int(nodes)))
        except ValueError:
            ap.error(f"--worlds {spec!r}: 1 or NODESxGPUS, e.g. 2x2")
    if a.calls < 1 or a.minutes <= 0 or not 1 <= a.shapes_per_op <= 3:
        ap.error("--calls >= 1, --minutes > 0 and --shapes-per-op 1-3")
    if a.out and not a.out.parent.is_dir():
        ap.error(f"--out {a.out}: the folder {a.out.parent} does not exist")
    from mkernel.hw import unavailable
    from mkernel.hw.runtime.emulate import launch

    reason = unavailable()
    if reason:
        print(f"soak: {reason}", file=sys.stderr)
        return 2
    report, ok = {"date": time.strftime("%Y-%m-%d %H:%M"), "command": " ".join(sys.argv), "worlds": {}}, True
    for nodes, gpn in worlds:
        share = 1 / 3 if nodes * gpn == 1 and len(worlds) > 1 else (2 / 3 if len(worlds) > 1 else 1.0)
        seconds = a.minutes * 60 * share
        t0 = time.monotonic()
        ranks = launch(soak_rank, nodes * gpn, args=(gpn, a.calls, seconds, a.seed, a.shapes_per_op),
                       timeout_s=seconds + 900)
        name = f"{nodes}x{gpn}"
        report["worlds"][name] = {"wall_s": time.monotonic() - t0, "ranks": ranks}
        for r in ranks:
            ok = ok and r["ok"]
            first, last = r["samples"][0], r["samples"][-1]
            print(f"{name} rank {r['rank']}: {'PASS' if r['ok'] else 'FAIL'} {r['calls']} calls in {r['loop_s']:.0f} s "
                  f"({r['calls_per_s']:.0f}/s, set-up {r['setup_s']:.0f} s), worst error "
                  f"{max(r['worst_error'].values()):.2e}; GPU memory {first['allocated'] >> 20} -> "
                  f"{last['allocated'] >> 20} MiB, RSS {first['rss'] >> 20} -> {last['rss'] >> 20} MiB, fds "
                  f"{first['fds']} -> {last['fds']}, threads {first['threads']} -> {last['threads']}"
                  + (f"; device error: {r['device_error']}" if r["device_error"] else ""))
            bad = {k: v for k, v in r["worst_error"].items() if not v <= TOLERANCE}
            if bad:
                print(f"  over {TOLERANCE}: {bad}")
    if a.out:
        a.out.write_text(json.dumps(report, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
