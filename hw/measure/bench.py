"""`mkernel bench`: the fused ops against their baselines on the same shapes, in one run, per rank.

Each rank of a torch.distributed group (torchrun, or :func:`mkernel.hw.runtime.emulate.launch` when ranks
share GPUs) calls :func:`bench_rank`. For every (op, size) it builds fresh random inputs, checks
every implementation's output against the fused op's float32 fallback (||out - ref|| / ||ref||),
then times it: ``warmup`` calls, then ``iters`` calls each between two CUDA events; the median per
rank, then the slowest rank. The same call is also captured in a CUDA graph and its replays timed
the same way: eager times include the host's per-call cost, graph times are the GPU's alone. The
fused op bumps its device epoch on every call and every replay, so no epoch is reused across timed
launches.

Implementations per op (an unavailable one is recorded with the reason, never silently dropped):

- ``fused``: the mkernel op (``torch.ops.mkernel.*``);
- ``nccl+matmul``: NCCL collectives and torch.matmul (NCCL needs one GPU per rank);
- ``symm_mem``: torch's async-TP ops: ``fused_all_gather_matmul``, ``fused_matmul_reduce_scatter``,
  matmul into a symmetric buffer + ``two_shot_all_reduce_``;
- ``nccl ring+sdpa``: ring attention as an NCCL P2P ring of K/V with flash SDPA and an LSE merge;
- ``a2a+matmul``: MoE as ``all_to_all_single`` of the routed rows and one matmul per expert;
- ``ceiling``: the op's computation alone, with no communication (the matmul ceiling).

Shapes are the reference grid's per-GPU shapes (mkernel-design.md section 8, sized for world 16);
TFLOPS per GPU count the op's useful flops on one rank.
"""
from __future__ import annotations

import math
import statistics
import sys

from mkernel.reference import BF16_LOOSE_RTOL
from mkernel.studies.sweep import reference_grid

from ..runtime.emulate import RankInfo



def grid(kernels, sizes: int | None) -> list[tuple[str, int, dict]]:
    """(kernel, size, shape) points of the reference grid, the first ``sizes`` sizes of each op."""
    pts, seen = [], {}
    for p in reference_grid(testbeds=("paper-ib-2x8",), kernels=kernels):
        seen[p.kernel] = seen.get(p.kernel, 0) + 1
        if sizes is None or seen[p.kernel] <= sizes:
            pts.append((p.kernel, p.size, dict(p.shape)))
    return pts


def time_events(fn, warmup: int, iters: int) -> float:
    """Median seconds of ``iters`` calls, each between two CUDA events on the current stream."""
    import torch

    for _ in range(warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e-3


def _graph_time(fn, iters: int) -> float:
    """Median seconds of one replay of a CUDA graph holding one call of ``fn``: the GPU time alone,
    without the host's per-call cost. Each replay of the fused op still bumps its device epoch."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return time_events(graph.replay, 2, iters)


def _rel(out, ref) -> float:
    return ((out.float() - ref.float()).norm() / ref.float().norm()).item()


def bench_rank(info: RankInfo, points: list, gpus_per_node: int, warmup: int = 3, iters: int = 20) -> list[dict]:
    """Every point on this rank; each row has per-implementation median seconds (this rank's) and errors."""
    import torch
    import torch.distributed as dist

    from .. import api
    from . import baselines

    torch.manual_seed(1234 + info.rank)
    nccl = dist.get_backend() == "nccl"
    rows = []
    for kernel, size, shape in points:
        print(f"bench rank {info.rank}: {kernel} size {size}: setting up", file=sys.stderr, flush=True)
        case = baselines.make(kernel, shape, info, gpus_per_node, nccl)
        row = {"kernel": kernel, "size": size, "shape": shape, "flops_per_gpu": case.flops, "impls": {}}
        for name, fn in case.impls.items():
            if isinstance(fn, str):
                row["impls"][name] = {"unavailable": fn}
                continue
            print(f"bench rank {info.rank}: {kernel} size {size}: {name}", file=sys.stderr, flush=True)
            try:
                case.poison()
                out = fn()
                err = None if name in case.unchecked else _rel(case.view(out), case.reference)
                t = time_events(fn, warmup, iters)
                try:
                    graph_s, why = _graph_time(fn, iters), None
                except Exception as exc:  # noqa: BLE001 - some calls cannot be captured; say which and why
                    graph_s, why = None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
                row["impls"][name] = {"s": t, "graph_s": graph_s, "graph_error": why, "rel_err": err,
                                      "ok": err is None or bool(err <= BF16_LOOSE_RTOL and math.isfinite(err))}
            except Exception as exc:  # noqa: BLE001 - a baseline torch refuses here is reported, not fatal
                if name == "fused":
                    raise
                row["impls"][name] = {"unavailable": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
            dist.barrier()
        rows.append(row)
        case.close()
    api.close()
    return rows


def combine(per_rank: list[list[dict]]) -> list[dict]:
    """The slowest rank's median per implementation, TFLOPS per GPU, and each baseline's ratio to fused
    (baseline time / fused time: > 1 means the fused op is faster)."""
    out = []
    for rows in zip(*per_rank):
        first = rows[0]
        impls = {}
        for name in first["impls"]:
            ranks = [r["impls"][name] for r in rows]
            if any("unavailable" in x for x in ranks):
                impls[name] = {"unavailable": next(x["unavailable"] for x in ranks if "unavailable" in x)}
                continue
            s = max(x["s"] for x in ranks)
            graphs = [x.get("graph_s") for x in ranks]
            graph_s = max(graphs) if all(g is not None for g in graphs) else None
            errs = [x["rel_err"] for x in ranks if x["rel_err"] is not None]
            impls[name] = {"s": s, "tflops_per_gpu": first["flops_per_gpu"] / s / 1e12, "graph_s": graph_s,
                           "graph_tflops_per_gpu": first["flops_per_gpu"] / graph_s / 1e12 if graph_s else None,
                           "graph_error": next((x.get("graph_error") for x in ranks if x.get("graph_error")), None),
                           "rel_err": max(errs) if errs else None, "ok": all(x["ok"] for x in ranks)}
        fused, fused_graph = impls["fused"]["s"], impls["fused"]["graph_s"]
        for name, x in impls.items():
            if "s" in x and name != "fused":
                x["fused_speedup"] = x["s"] / fused
                x["graph_fused_speedup"] = x["graph_s"] / fused_graph if x["graph_s"] and fused_graph else None
        out.append({**{k: first[k] for k in ("kernel", "size", "shape", "flops_per_gpu")}, "impls": impls})
    return out


def run(points: list, *, emulate: tuple[int, int] | None = None, ranks: tuple[int, int, int, int] = (0, 1, 0, 1),
        warmup: int = 3, iters: int = 20) -> dict | None:
    """Run the bench on the ranks at hand: on ``emulate`` = (nodes, gpus per node) ranks sharing this
    host's GPUs (MPS, gloo), else on this process's rank of ``ranks`` = (rank, world, local rank,
    ranks per node): torchrun's (one process per rank, NCCL; the CLI reads them, and the rendezvous,
    from the environment), or one rank. Returns the combined result on rank 0 (None on the others)."""
    import torch
    import torch.distributed as dist

    from ..runtime import emulate as emu

    if emulate is not None:
        nodes, gpn = emulate
        per_rank = emu.launch(bench_rank, nodes * gpn, args=(points, gpn, warmup, iters), timeout_s=580)
        mode = f"emulated {nodes}x{gpn} on {torch.cuda.device_count()} GPU(s) (MPS, gloo)"
    else:
        rank, world, local, gpn = ranks
        torch.cuda.set_device(local)
        if not dist.is_initialized():
            dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", local))
        sms = torch.cuda.get_device_properties(local).multi_processor_count
        mine = bench_rank(RankInfo(rank, world, local, sms, False), points, gpn, warmup, iters)
        per_rank = [None] * world
        dist.all_gather_object(per_rank, mine)
        if rank != 0:
            return None
        nodes = world // gpn
        mode = f"{nodes}x{gpn} ranks, one GPU each (NCCL)"
    return {"mode": mode, "emulated": emulate is not None, "world": nodes * gpn, "nodes": nodes, "gpus_per_node": gpn,
            "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "warmup": warmup, "iters": iters,
            "rows": combine(per_rank)}


def table(result: dict) -> list[str]:
    """One line per (op, size): fused TFLOPS per GPU and each baseline's time over the fused op's."""
    def ratio(x: dict) -> str:
        graph = x.get("graph_fused_speedup")
        return f"{x['fused_speedup']:.2f}x" + (f" ({graph:.2f}x)" if graph else "")

    lines = [f"{'op':<18} {'size':>6} {'fused TF/GPU':>12} {'graph TF':>8} {'err':>8}  baselines: their time / fused "
             f"time, eager (CUDA graph)"]
    for r in result["rows"]:
        f = r["impls"]["fused"]
        others = "  ".join(f"{n} {ratio(x)}" if "s" in x else f"{n} n/a" for n, x in r["impls"].items() if n != "fused")
        bad = "" if all(x.get("ok", True) for x in r["impls"].values()) else "  WRONG OUTPUT"
        graph = f"{f['graph_tflops_per_gpu']:8.1f}" if f.get("graph_tflops_per_gpu") else f"{'n/a':>8}"
        lines.append(f"{r['kernel']:<18} {r['size']:>6} {f['tflops_per_gpu']:>12.1f} {graph} {f['rel_err']:>8.1e}  "
                     f"{others}{bad}")
    return lines


def plot(result: dict, path) -> object:
    """TFLOPS per GPU against size, one panel per op, one line per implementation."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    kernels = list(dict.fromkeys(r["kernel"] for r in result["rows"]))
    fig, axes = plt.subplots(1, len(kernels), figsize=(4.2 * len(kernels), 3.4), squeeze=False)
    for ax, kernel in zip(axes[0], kernels):
        rows = [r for r in result["rows"] if r["kernel"] == kernel]
        for name in rows[0]["impls"]:
            pts = [(r["size"], r["impls"][name]["tflops_per_gpu"]) for r in rows if "s" in r["impls"][name]]
            if pts:
                ax.plot(*zip(*pts), "o-", label=name)
        ax.set_xscale("log", base=2)
        ax.set_title(kernel)
        ax.set_xlabel("size")
        ax.set_ylabel("TFLOPS per GPU")
        ax.legend(fontsize=7)
    fig.suptitle(result["mode"], fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
