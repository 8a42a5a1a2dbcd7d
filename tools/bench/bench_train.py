"""Forward + backward of the tensor-parallel MLP against the torch-only model (issue 34's speed item).

Per size (T tokens, hidden H, ffn F, bf16), one training step without the optimizer (forward, MSE
loss, backward; the SGD update is the same elementwise pass on both and is left out), the median
of CUDA-event-timed steps and, with ``--graphs``, of CUDA-graph replays of the step:

- ``torch``: ``fc2(gelu(fc1(x)))`` (two nn.Linear) on all T tokens on one GPU; at world N every rank
  runs its own copy: the single-GPU baseline a user would otherwise run;
- ``tp-fallback`` / ``tp-auto`` / ``tp-fused``: :class:`mkernel.hw.tp.ParallelMLP` over the world
  group on T / world tokens per rank (ag_gemm, GELU, gemm_rs; backward gemm_rs and ag_gemm), with
  mode fallback (NCCL + torch.matmul), auto (the dispatch rule) and fused (the kernels, forward and
  backward duals). At world 1 fallback and auto are torch.matmul: they measure the layers' cost.

Each TP variant's first loss is checked against the torch model's (relative difference <= 2e-2)
before it is timed. Speedups are torch time / variant time and tp-fallback time / variant time,
each from the slowest rank. Writes JSON (``--out``) and prints a table.

    python tools/bench/bench_train.py --out train-w1.json                        # world 1
    torchrun --nproc-per-node 2 tools/bench/bench_train.py --out train-w2.json   # world 2: NCCL, a GPU per rank
    python tools/bench/bench_train.py --sizes 8192x4096x16384 --graphs --out t.json

Exit codes: 0 measured, 1 a variant's loss disagreed with torch's, 2 bad arguments or no GPU.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

from mkernel.reference import BF16_LOOSE_RTOL

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # harness.training: the torch-only model

SIZES = ((4096, 2048, 8192), (8192, 4096, 16384), (16384, 8192, 28672))  # T x H x F (GPT-like ffn = 4 H)
VARIANTS = ("torch", "tp-fallback", "tp-auto", "tp-fused")
LOSS_RTOL = BF16_LOOSE_RTOL  # bf16 rounding enters twice: weights and activations, then the collectives
COLLECTIVE_TIMEOUT_S = 300  # a rank stuck in a collective gives up with NCCL's error, never hangs


def _bad(message: str):
    print(f"bench_train: {message}", file=sys.stderr)
    raise SystemExit(2)


def _sizes(text: str) -> list[tuple[int, int, int]]:
    try:
        sizes = [tuple(int(v) for v in s.split("x")) for s in text.split(",") if s]
    except ValueError:
        sizes = []
    if not sizes or any(len(s) != 3 or min(s) < 1 for s in sizes):
        _bad(f"--sizes {text!r} must be TxHxF[,TxHxF...] with positive integers")
    return sizes


def _init() -> tuple[int, int]:
    import torch
    import torch.distributed as dist

    from mkernel.hw.runtime import safety

    if not torch.cuda.is_available():
        _bad("needs a CUDA GPU, and none is visible")
    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    safety.apply_rendezvous("bench_train")
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", local),
                            timeout=datetime.timedelta(seconds=COLLECTIVE_TIMEOUT_S))
    return rank, world


def _step(model, x, y, elements: int):
    """One forward + loss (this rank's share of the MSE over ``elements``) + backward; returns the
    loss. Gradients are set afresh each time (inside a CUDA graph: in its memory pool)."""
    for p in model.parameters():
        p.grad = None
    loss = (model(x).float() - y.float()).pow(2).sum() / elements
    loss.backward()
    return loss


def _measure(tokens: int, hidden: int, ffn: int, warmup: int, iters: int, graphs: bool) -> dict:
    import torch
    import torch.distributed as dist
    from harness.training import Mlp

    from mkernel.hw.measure.bench import _graph_time, time_events
    from mkernel.hw.collectives import plain_all_reduce
    from mkernel.hw.groups import group_info
    from mkernel.hw.tp import ParallelMLP

    g = group_info(None)
    if tokens % g.world or ffn % g.world:
        raise ValueError(f"T = {tokens} and F = {ffn} must split over {g.world} ranks")
    gen = torch.Generator(device="cuda").manual_seed(0)
    x, y = (torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(2))
    n = tokens // g.world
    mine = slice(g.rank * n, (g.rank + 1) * n)
    ref = Mlp(hidden, ffn).to("cuda", torch.bfloat16)
    rows: dict[str, dict] = {}
    want = None
    for variant in VARIANTS:
        try:
            if variant == "torch":
                model, xs, ys = ref, x, y
            else:
                model = ParallelMLP.from_mlp(ref.fc1, ref.fc2, mode=variant.split("-")[1])
                xs, ys = x[mine].contiguous(), y[mine].contiguous()
            loss = _step(model, xs, ys, y.numel()).detach()
            loss = float(loss if variant == "torch" else plain_all_reduce(loss.clone(), g))  # TP: the sum of the shares
            want = loss if want is None else want
            row = {"loss": loss, "loss_rel_diff": abs(loss - want) / abs(want)}
            row["eager_s"] = time_events(lambda: _step(model, xs, ys, y.numel()), warmup, iters)
            if graphs:
                row["graph_s"] = _graph_time(lambda: _step(model, xs, ys, y.numel()), iters)
        except Exception as exc:  # noqa: BLE001 - keep what the other variants measured
            row = {"failed": f"{type(exc).__name__}: {exc}"[:800]}
        rows[variant] = row
        dist.barrier()
    return rows


def _combine(per_rank: list[dict]) -> dict:
    """Per variant: the slowest rank's times, and speedups over torch and over tp-fallback."""
    out = {}
    for variant in VARIANTS:
        rows = [r[variant] for r in per_rank]
        failed = next((r["failed"] for r in rows if "failed" in r), None)
        if failed:
            out[variant] = {"failed": failed}
            continue
        out[variant] = {"loss": rows[0]["loss"], "loss_rel_diff": max(r["loss_rel_diff"] for r in rows),
                        **{k: max(r[k] for r in rows) for k in ("eager_s", "graph_s") if k in rows[0]}}
    for variant, row in out.items():
        for base in ("torch", "tp-fallback"):
            for k in ("eager_s", "graph_s"):
                if k in row and k in out.get(base, {}):
                    row[f"{k[:-2]}_speedup_over_{base}"] = out[base][k] / row[k]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    ap.add_argument("--sizes", default=",".join("x".join(map(str, s)) for s in SIZES), help="TxHxF[,TxHxF...]")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--graphs", action="store_true", help="also time CUDA-graph replays of the step")
    args = ap.parse_args()
    sizes = _sizes(args.sizes)
    if args.warmup < 1 or args.iters < 1:
        _bad("--warmup and --iters must be at least 1")
    from mkernel.hw.runtime import safety

    safety.apply_no_multicast()
    import torch
    import torch.distributed as dist

    rank, world = _init()
    t0 = time.time()
    results = []
    for tokens, hidden, ffn in sizes:
        mine = _measure(tokens, hidden, ffn, args.warmup, args.iters, args.graphs)
        per_rank = [None] * world
        dist.all_gather_object(per_rank, mine)
        results.append({"tokens": tokens, "hidden": hidden, "ffn": ffn, "variants": _combine(per_rank)})
    import mkernel.hw.api as api

    api.check()
    bad = [(r["tokens"], v) for r in results for v, row in r["variants"].items()
           if row.get("loss_rel_diff", 0.0) > LOSS_RTOL]
    if rank == 0:
        commit = Path(".commit").read_text().strip() if Path(".commit").is_file() else "unknown"
        meta = {"date": time.strftime("%Y-%m-%d"), "commit": commit, "gpu": torch.cuda.get_device_name(),
                "world": world, "torch": torch.__version__, "command": " ".join(sys.argv), "wall_s": time.time() - t0,
                "step": "forward + MSE loss + backward, bf16, no optimizer step", "baseline": "torch (one GPU)"}
        print(f"{'T x H x F':>20} {'variant':>12} {'eager ms':>9} {'graph ms':>9} {'vs torch':>9} {'vs tp-fb':>9}")
        for r in results:
            for variant, row in r["variants"].items():
                if "failed" in row:
                    print(f"{r['tokens']:>6}x{r['hidden']}x{r['ffn']:<6} {variant:>12} FAILED {row['failed']}")
                    continue
                graph = f"{row['graph_s'] * 1e3:9.3f}" if "graph_s" in row else f"{'-':>9}"
                vs_torch, vs_fallback = (row.get(f"eager_speedup_over_{b}", 0.0) for b in ("torch", "tp-fallback"))
                print(f"{r['tokens']:>6}x{r['hidden']}x{r['ffn']:<6} {variant:>12} {row['eager_s'] * 1e3:9.3f} {graph} "
                      f"{vs_torch:8.2f}x {vs_fallback:8.2f}x")
        if args.out:
            args.out.write_text(json.dumps({"meta": meta, "results": results}, indent=1))
        for size, variant in bad:
            print(f"bench_train: {variant} at T = {size}: the loss differs from torch's by more than {LOSS_RTOL}",
                  file=sys.stderr)
    api.close()
    dist.destroy_process_group()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
