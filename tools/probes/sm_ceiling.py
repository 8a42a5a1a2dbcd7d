"""How fast can a few SMs read, write, or copy HBM at all? A ceiling for issue 27's one-GPU goals.

The goals ask for a copy at >= 90% of device-to-device bandwidth within 16 SMs: about 235 GB/s read +
written per SM on an H200. No path of the fused kernel has measured above 93 GB/s per SM
(docs/results/2026-12-03-box-copies.md). This probe measures the simplest kernels that could do it,
with nothing of the fused kernel in them: each block streams its own contiguous range with wide
vector loads held in registers (``read``: loads folded into one xor per element, one store per block;
``write``: stores only; ``copy``: both), on 1 ... 32 SMs with one or two blocks per SM, against torch's
D2D ``copy_`` of 1 GiB in the same run. If ``read`` alone tops out near 100 GB/s per SM, 235 read +
written is not there on any path that goes through an SM.

    python tools/probes/sm_ceiling.py --sms 1,2,4,8,16,32 --out ceiling.json   # needs a GPU, ~1 minute

Exit codes: 0 ok, 1 a check failed, 2 bad arguments or no GPU.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import triton
import triton.language as tl

MIB = 1 << 20
KINDS = ("read", "write", "copy")


@triton.jit
def stream_kernel(src, dst, out, words_per_block, KIND: tl.constexpr, BLOCK: tl.constexpr):
    """Block b streams int32 words [b * words_per_block, (b + 1) * words_per_block) of ``src``
    (KIND 0: read, xor-folded, one BLOCK-wide store to ``out`` per block), of ``dst`` (1: write
    zeros) or from ``src`` to ``dst`` (2: copy). ``words_per_block`` is a multiple of BLOCK."""
    pid = tl.program_id(0)
    base = pid.to(tl.int64) * words_per_block
    lanes = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.int32)
    for i in range(0, words_per_block, BLOCK):
        at = tl.max_contiguous(tl.multiple_of(base + i + lanes, BLOCK), BLOCK)  # so 16-byte accesses
        if KIND == 0:
            acc ^= tl.load(src + at)
        elif KIND == 1:
            tl.store(dst + at, acc)
        else:
            tl.store(dst + at, tl.load(src + at))
    if KIND == 0:
        tl.store(out + pid.to(tl.int64) * BLOCK + lanes, acc)


def run(args, sms: list[int], per_sm: list[int]) -> int:
    import torch

    from mkernel.hw.measure.bench import time_events

    timed = lambda fn: time_events(fn, 2, args.reps) * 1e6  # median us between CUDA events, after two warm-ups
    props = torch.cuda.get_device_properties(0)
    if max(sms) > props.multi_processor_count:
        print(f"sm_ceiling: --sms asks for {max(sms)} SMs; this GPU has {props.multi_processor_count}", file=sys.stderr)
        return 2
    words = args.mib * MIB // 4
    src = torch.randint(-2**31, 2**31 - 1, (words,), dtype=torch.int32, device="cuda")
    dst = torch.empty_like(src)
    x, y = torch.empty(512 * MIB, dtype=torch.bfloat16, device="cuda").normal_(), \
        torch.empty(512 * MIB, dtype=torch.bfloat16, device="cuda")
    d2d = 2 * x.numel() * 2 / timed(lambda: y.copy_(x)) / 1e3
    rows, failed = [], 0
    for kind in KINDS:
        for k in per_sm:
            for n in sms:
                blocks = n * k
                per_block = words // blocks // args.block * args.block
                out = torch.empty(blocks * args.block, dtype=torch.int32, device="cuda")
                dst.zero_()
                launch = lambda: stream_kernel[(blocks,)](src, dst, out, per_block, KIND=KINDS.index(kind),
                                                          BLOCK=args.block, num_warps=args.warps)
                launch()
                torch.cuda.synchronize()
                span = blocks * per_block
                if kind == "read":  # the fold of block b is the xor of its range, as torch computes it
                    want = src[:span].view(blocks, -1, args.block)
                    ref = want[:, 0].clone()
                    for j in range(1, want.shape[1]):
                        ref ^= want[:, j]
                    ok = torch.equal(out.view(blocks, args.block), ref)
                elif kind == "write":
                    ok = not bool(dst[:span].any())
                else:
                    ok = torch.equal(dst[:span], src[:span])
                us = timed(launch)
                moved = span * 4 * (2 if kind == "copy" else 1)
                rate = moved / us / 1e3
                failed += not ok
                rows.append({"kind": kind, "sms": n, "blocks_per_sm": k, "us": us, "gb_per_s": rate,
                             "gb_per_s_per_sm": rate / n, "ok": ok})
                print(f"{kind:<6} {n:>3} SMs x{k} {us:>9.1f} us {rate:>8.1f} GB/s {rate / n:>7.1f} /SM "
                      f"{'ok' if ok else 'WRONG'}", flush=True)
    report = {"date": time.strftime("%Y-%m-%d"), "machine": props.name, "command": " ".join(sys.argv),
              "block_words": args.block, "warps": args.warps, "mib": args.mib, "d2d_gb_per_s": d2d, "results": rows}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    print(f"\nD2D (torch copy_, 1 GiB) {d2d:.0f} GB/s read + written; copy at 90% of it within 16 SMs needs "
          f"{0.9 * d2d / 16:.0f} GB/s per SM")
    for kind in KINDS:
        best = max((r for r in rows if r["kind"] == kind and r["sms"] <= 16 and r["ok"]), key=lambda r: r["gb_per_s"],
                   default=None)
        if best:
            print(f"{kind:<6} best within 16 SMs: {best['gb_per_s']:.0f} GB/s ({best['gb_per_s'] / d2d:.0%} of D2D) "
                  f"at {best['sms']} SMs x{best['blocks_per_sm']}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sms", default="1,2,4,8,16,32", help="comma-separated SM counts")
    ap.add_argument("--blocks-per-sm", default="1,2", help="comma-separated blocks per SM (occupancy)")
    ap.add_argument("--mib", type=int, default=1024, help="bytes streamed per configuration, MiB")
    ap.add_argument("--block", type=int, default=8192, help="int32 words a block moves per loop step (a power of 2)")
    ap.add_argument("--warps", type=int, default=8, help="warps per block")
    ap.add_argument("--reps", type=int, default=5, help="timed calls per configuration (median)")
    ap.add_argument("--out", help="write every measurement as JSON here")
    args = ap.parse_args(argv)
    try:
        sms = [int(s) for s in args.sms.split(",")]
        per_sm = [int(s) for s in args.blocks_per_sm.split(",")]
        if min(sms) < 1 or min(per_sm) < 1 or args.mib < 1 or args.reps < 1 or args.warps not in (1, 2, 4, 8, 16) \
                or args.block < 256 or args.block & (args.block - 1):
            raise ValueError
    except ValueError:
        print(f"sm_ceiling: --sms {args.sms!r} and --blocks-per-sm {args.blocks_per_sm!r} must be positive integers, "
              f"--mib and --reps >= 1, --warps 1, 2, 4, 8 or 16, --block a power of 2 from 256", file=sys.stderr)
        return 2
    import torch

    from mkernel.hw.runtime import safety

    if not torch.cuda.is_available():
        print("sm_ceiling: needs a CUDA GPU", file=sys.stderr)
        return 2
    safety.apply_no_multicast()
    return run(args, sms, per_sm)


if __name__ == "__main__":
    sys.exit(main())
