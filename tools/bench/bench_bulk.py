"""Per-SM data-movement benchmark on one GPU (issue 27): the fused kernel's copy, reduce and gather
steps on the register path (hw/kernels/tiles.py), the bulk path (hw/kernels/bulk_copy.py: 1-D bulk copies), the
tensor path (hw/kernels/bulk_tensor.py: 2-D box copies through host-built tensor maps; gathers excepted) and,
for copies, Triton's TMA descriptors, against torch's device-to-device copy (cudaMemcpy via ``tensor.copy_``) in the same run.

Local HBM stands in for a peer (the code path is the same). Each op runs as a standalone
persistent kernel (hw/measure/bulk_probe.py) on 1, 2, 4, ... SMs over tasks shaped like the plans':
- ``copy-tile``: 128 x 256 tiles of 8192-column buffers (GEMM+AR / GEMM+RS partial tiles);
- ``copy-tile16``: 16 x 256 tiles (8 KiB tasks): with copy-tile, a fit of the fixed cost per task;
- ``copy-w1k``, ``copy-w2k``: 128 x 1024 and 128 x 2048 tiles (2 and 4 KiB lines): where the bulk
  path overtakes the register path as lines grow (bulk_copy.LINE_MIN, the fused kernel's ``auto``);
- ``copy-rows``: 128 whole rows (AllGather+GEMM shards: one contiguous range per task);
- ``reduce-G``: writes = the sum of G sources, 128 x 256 tiles, fp32 sum (G = 2, 4, 8);
- ``accumulate-G``: the same G sources added in bf16 at the destination (cp.reduce.async.bulk .add,
  bulk path only): the accumulate-into-owner step;
- ``gather-16``: tasks of 16 rows picked by an index list from a 4096-column source (MoE dispatch).
Rates are bytes read + written per second (as the D2D baseline counts them). Every configuration is
checked before it is timed: outputs poisoned with NaN, fresh random inputs, then compared with torch
(copies and gathers bit-exact, reduces bit-exact against the fp32 sum in source order, accumulates
within 1e-2 of the float64 sum). Goals: copy >= 90% of D2D with <= 16 SMs, reduce-8 >= 75%.

    python tools/bench/bench_bulk.py --out bench_bulk.json        # about 2 minutes on an H200

Exit codes: 0 ok, 1 a check failed, 2 bad arguments or no GPU.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from mkernel.reference import BF16_RTOL

GOAL_SMS = 16
GOALS = {"copy-tile": 0.90, "copy-rows": 0.90, "reduce-8": 0.75}
KIB = 1024
MIB = 1024 * KIB


@dataclass(frozen=True)
class Case:
    name: str
    op: str  # bulk_probe.Op member name
    sources: int  # G (1 for copies and gathers)
    rows: int  # of each buffer
    cols: int
    tile: tuple[int, int]  # rows x cols of a task's regions (gather: rows per task)
    paths: tuple[str, ...]


def cases(scale: int) -> list[Case]:
    r = 8192 // scale
    reg_bulk = ("register", "bulk", "bulk@48K", "tensor")
    return ([Case("copy-tile", "COPY", 1, r, 8192, (128, 256), reg_bulk + ("tma",)),
             Case("copy-tile16", "COPY", 1, r // 4, 8192, (16, 256), ("register", "bulk", "tensor")),
             Case("copy-w1k", "COPY", 1, r, 8192, (128, 1024), ("register", "bulk", "tensor")),
             Case("copy-w2k", "COPY", 1, r, 8192, (128, 2048), ("register", "bulk", "tensor")),
             Case("copy-rows", "COPY", 1, r, 8192, (128, 8192), reg_bulk + ("tma",))]
            + [Case(f"reduce-{g}", "REDUCE", g, r // 2, 8192, (128, 256), reg_bulk) for g in (2, 4, 8)]
            + [Case(f"accumulate-{g}", "ACCUMULATE", g, r // 2, 8192, (128, 256), ("bulk", "bulk@48K", "tensor"))
               for g in (2, 4, 8)]
            + [Case("gather-16", "GATHER", 1, r, 4096, (16, 4096), reg_bulk)])


def build(case: Case, torch, seed: int):
    """(buffers: the sources, then the output; tasks; bytes read + written; a gather's index)."""
    from mkernel.hw.measure.bulk_probe import Task

    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(seed)
    srcs = [torch.empty(case.rows, case.cols, dtype=torch.bfloat16, device=dev) for _ in range(case.sources)]
    out = torch.empty(case.rows, case.cols, dtype=torch.bfloat16, device=dev)
    buffers = srcs + [out]
    o = len(srcs)
    tasks, idx = [], None
    tr, tc = case.tile
    if case.op == "GATHER":
        idx = torch.randint(0, case.rows, (case.rows,), generator=g, device=dev)
        picks = idx.tolist()
        for r0 in range(0, case.rows, tr):
            tasks.append(Task(((0, 0, 0, case.rows, case.cols),), ((o, r0, 0, tr, case.cols),),
                              tuple(picks[r0:r0 + tr])))
    else:
        for r0 in range(0, case.rows, tr):
            for c0 in range(0, case.cols, tc):
                reads = tuple((p, r0, c0, tr, tc) for p in range(case.sources))
                tasks.append(Task(reads, ((o, r0, c0, tr, tc),)))
    moved = (case.sources + 1) * out.numel() * 2
    return buffers, tasks, moved, idx


def check(case: Case, probe, buffers, idx, torch) -> tuple[bool, str]:
    """Poison the output (NaN; an accumulate's: random values it must add to), fresh random inputs,
    one call, compare with torch."""
    *srcs, out = buffers
    for s in srcs:
        s.normal_()
    if case.op == "ACCUMULATE":
        out.normal_()
        start = out.double()
    else:
        out.fill_(float("nan"))
    probe()
    torch.cuda.synchronize()
    err = probe.error()
    if err:
        return False, err
    if case.op in ("COPY", "GATHER"):
        ref = srcs[0] if case.op == "COPY" else srcs[0][idx]
        ok = torch.equal(out, ref)
        return ok, "bit-exact" if ok else f"{int((out != ref).sum())} elements differ"
    if case.op == "REDUCE":
        acc = torch.zeros_like(out, dtype=torch.float32)
        for s in srcs:
            acc += s.float()
        ref = acc.bfloat16()
        ok = torch.equal(out, ref)
        worst = float((out.float() - acc).abs().max())
        return ok, "bit-exact (fp32 sum in source order)" if ok else \
            f"{int((out != ref).sum())} elements differ from the fp32 sum, max {worst:.3g}"
    ref64 = start + sum(s.double() for s in srcs)
    rel = float((out.double() - ref64).norm() / ref64.norm())
    return rel <= BF16_RTOL and not bool(out.isnan().any()), f"||out - ref|| / ||ref|| = {rel:.2e} (bf16 adds)"


def timed(fn, reps: int, torch) -> float:
    """Median microseconds of ``reps`` calls, each between its own CUDA events, after two warm-ups."""
    fn()
    fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times)


def d2d(torch, reps: int) -> dict:
    """torch's device-to-device copy, 128 MiB and 1 GiB; the faster is the baseline."""
    best = {}
    for nbytes in (128 * MIB, 1024 * MIB):
        x = torch.empty(nbytes // 2, dtype=torch.bfloat16, device="cuda").normal_()
        y = torch.empty_like(x)
        us = timed(lambda: y.copy_(x), reps, torch)
        ok = torch.equal(x, y)
        rate = 2 * nbytes / us / 1e3
        best[f"{nbytes // MIB} MiB"] = {"us": us, "gb_per_s": rate, "ok": ok}
    best["baseline_gb_per_s"] = max(v["gb_per_s"] for v in best.values())
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="write every measurement as JSON here")
    ap.add_argument("--sms", default="1,2,4,8,16,32", help="comma-separated SM (block) counts")
    ap.add_argument("--reps", type=int, default=5, help="timed calls per configuration (median)")
    ap.add_argument("--smem", type=int, default=180 * KIB, help="the bulk path's shared memory per block, bytes")
    ap.add_argument("--stage-bytes", type=int, default=16 * KIB, help="a copy stage of the bulk path, bytes")
    ap.add_argument("--reduce-bytes", type=int, default=8 * KIB, help="one source's share of a bulk reduce stage")
    ap.add_argument("--lag", type=int, default=None, help="stores a bulk refill leaves in flight, 0-4 (default: bulk.LAG)")
    ap.add_argument("--only", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--paths", default="", help="comma-separated paths, e.g. bulk,bulk@48K (default: each case's all)")
    ap.add_argument("--scale", type=int, default=1, help="divide buffer rows by this (smaller, faster runs)")
    ap.add_argument("--commit", default=None, help="the commit measured (default: the .commit file or git)")
    ap.add_argument("--debug", action="store_true", help="tracebacks instead of one-line errors")
    args = ap.parse_args(argv)
    try:
        sms = [int(s) for s in args.sms.split(",")]
        pow2 = lambda n: n >= 4096 and n & (n - 1) == 0
        if not sms or min(sms) < 1 or args.reps < 1 or args.scale not in (1, 2, 4, 8) \
                or not pow2(args.stage_bytes) or not pow2(args.reduce_bytes) \
                or args.lag is not None and not 0 <= args.lag <= 4:
            raise ValueError
    except ValueError:
        print(f"bench_bulk: --sms {args.sms!r} must be positive integers, --reps >= 1, --scale 1, 2, 4 or 8, "
              f"--stage-bytes and --reduce-bytes powers of two from 4096, --lag 0 ... 4", file=sys.stderr)
        return 2
    chosen = [c for c in cases(args.scale) if not args.only or c.name in args.only.split(",")]
    if not chosen:
        print(f"bench_bulk: --only {args.only!r} names no case; cases: "
              f"{', '.join(c.name for c in cases(1))}", file=sys.stderr)
        return 2
    from mkernel.hw import unavailable
    from mkernel.hw.runtime import safety

    if unavailable():
        print(f"bench_bulk: {unavailable()}", file=sys.stderr)
        return 2
    safety.apply_no_multicast()
    try:
        return run(args, sms, chosen)
    except Exception as e:  # one line, the reason; --debug for the traceback
        if args.debug:
            raise
        print(f"bench_bulk: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


def run(args, sms: list[int], chosen: list[Case]) -> int:
    import torch
    import triton

    from mkernel.hw.kernels import bulk
    from mkernel.hw.measure import bulk_probe as bp

    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    t0 = time.time()
    props = torch.cuda.get_device_properties(0)
    if max(sms) > props.multi_processor_count:
        print(f"bench_bulk: --sms asks for {max(sms)} SMs; this GPU has {props.multi_processor_count}",
              file=sys.stderr)
        return 2
    lag = bulk.LAG if args.lag is None else args.lag
    base = d2d(torch, args.reps)
    rows, failed = [], 0
    for ci, case in enumerate(chosen):
        buffers, tasks, moved, idx = build(case, torch, seed=ci)
        for path in (p for p in case.paths if not args.paths or p in args.paths.split(",")):
            smem = 48 * KIB if path.endswith("@48K") else args.smem
            try:
                probe = bp.Probe(bp.Op[case.op], bp.Path[path.split("@")[0].upper()], tasks, buffers, max(sms),
                                 smem=smem, stage_bytes=args.stage_bytes, reduce_bytes=args.reduce_bytes, lag=lag)
            except ValueError as e:  # a ring that holds no stage, or unboxed regions: not runnable, not a failure
                print(f"{case.name:<13} {path:<9} skipped: {e}", flush=True)
                continue
            for n in sms:
                probe.blocks = n
                ok, how = check(case, probe, buffers, idx, torch)
                us = timed(lambda: probe(n), args.reps, torch) if ok else None
                rate = moved / us / 1e3 if ok else 0.0
                failed += not ok
                rows.append({"case": case.name, "path": path, "sms": n, "smem": smem if path != "register" else None,
                             "tasks": len(tasks), "bytes": moved, "us": us, "gb_per_s": rate,
                             "of_d2d": rate / base["baseline_gb_per_s"], "ok": ok, "check": how})
                print(f"{case.name:<13} {path:<9} {n:>3} SMs {us or 0:>10.1f} us {rate:>8.1f} GB/s  {how}", flush=True)
    report = {"date": time.strftime("%Y-%m-%d"), "commit": _commit(args.commit), "machine": props.name,
              "sms_on_gpu": props.multi_processor_count, "torch": torch.__version__, "triton": triton.__version__,
              "command": " ".join(sys.argv), "seconds": round(time.time() - t0, 1), "lag": lag,
              "stage_bytes": args.stage_bytes, "reduce_bytes": args.reduce_bytes, "d2d": base, "results": rows,
              "goals": _goals(rows), "terms": _terms(rows)}
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))
    _table(rows, base, sms)
    return 1 if failed else 0


def _goals(rows: list[dict]) -> dict:
    """Per goal case and path: the best share of D2D within GOAL_SMS SMs, and at how many."""
    out = {}
    for case, goal in GOALS.items():
        for path in dict.fromkeys(r["path"] for r in rows if r["case"] == case):
            got = [r for r in rows if (r["case"], r["path"]) == (case, path) and r["sms"] <= GOAL_SMS and r["ok"]]
            if got:
                best = max(got, key=lambda r: r["of_d2d"])
                out.setdefault(case, {"goal": goal})[path] = {"of_d2d": best["of_d2d"], "sms": best["sms"],
                                                              "met": best["of_d2d"] >= goal}
    return out


def _terms(rows: list[dict]) -> dict:
    """What the simulator's profile would take, per case and path: one SM's rate (median over 1-8
    SMs of rate / SMs) and the most any SM count reached; per path, a copy task's fixed cost and
    one SM's streaming rate, from the line through (bytes, time) per task of copy-tile16 and
    copy-tile on one SM (time = task_us + bytes / rate)."""
    out = {}
    for key in sorted({(r["case"], r["path"]) for r in rows}):
        got = [r for r in rows if (r["case"], r["path"]) == key and r["ok"]]
        few = [r["gb_per_s"] / r["sms"] for r in got if r["sms"] <= 8]
        if got:
            out[f"{key[0]} {key[1]}"] = {"sm_gb_per_s": statistics.median(few) if few else None,
                                         "max_gb_per_s": max(r["gb_per_s"] for r in got)}
    for path in sorted({r["path"] for r in rows}):
        one = {r["case"]: r for r in rows if r["path"] == path and r["sms"] == 1 and r["ok"]}
        if "copy-tile16" in one and "copy-tile" in one:
            (b1, t1), (b2, t2) = ((one[c]["bytes"] / one[c]["tasks"], one[c]["us"] / one[c]["tasks"])
                                  for c in ("copy-tile16", "copy-tile"))
            if t2 > t1:
                rate = (b2 - b1) / (t2 - t1) / 1e3  # GB/s, bytes read + written
                out[f"copy task {path}"] = {"task_us": t1 - b1 / rate / 1e3, "sm_gb_per_s": rate}
    return out


def _table(rows: list[dict], base: dict, sms: list[int]) -> None:
    print(f"\nGB/s read + written; D2D (torch copy_) {base['baseline_gb_per_s']:.0f} GB/s. Last column: best "
          f"within {GOAL_SMS} SMs / D2D.")
    print(f"{'case':<13} {'path':<9}" + "".join(f"{n:>8}" for n in sms) + f"{'best':>8}")
    for key in dict.fromkeys((r["case"], r["path"]) for r in rows):
        got = {r["sms"]: r for r in rows if (r["case"], r["path"]) == key}
        cells = "".join(f"{got[n]['gb_per_s']:>8.0f}" if got[n]["ok"] else f"{'FAIL':>8}" for n in sms)
        best = max((r["of_d2d"] for r in got.values() if r["sms"] <= GOAL_SMS and r["ok"]), default=0.0)
        print(f"{key[0]:<13} {key[1]:<9}{cells}{best:>7.0%}")
    for case, g in _goals(rows).items():
        paths = ", ".join(f"{p} {v['of_d2d']:.0%} ({v['sms']} SMs{', met' if v['met'] else ''})"
                          for p, v in g.items() if p != "goal")
        print(f"goal {case} >= {g['goal']:.0%} of D2D within {GOAL_SMS} SMs: {paths}")


def _commit(given: str | None) -> str:
    if given:
        return given
    if Path(".commit").is_file():
        return Path(".commit").read_text().strip()
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
