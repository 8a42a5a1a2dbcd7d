"""How fast can a few SMs read, write, or copy HBM at all? A ceiling for issue 27's one-GPU goals.

The goals ask for a copy at >= 90% of device-to-device bandwidth within 16 SMs: about 235 GB/s read +
written per SM on an H200. No path of the fused kernel has measured above 93 GB/s per SM
(docs/results/2026-12-03-box-copies.md). This probe measures the simplest kernels that could do it,
with nothing of the fused kernel in them: blocks claim chunks of a buffer from a counter and stream
them with wide vector loads held in registers (``read``: loads folded into one xor per element, one
store per chunk; ``write``: stores only; ``copy``: both), against torch's D2D ``copy_`` of 1 GiB in
the same run.

**Pinned to SMs.** The grid is every SM times the blocks per SM asked for; a block whose ``%smid`` is
not below the SM count asked for leaves at once, so N SMs with k blocks each do all the work. (The
first version launched N x k blocks and let the scheduler spread them, one per SM, over N x k SMs:
its "16 SMs x 2" rows were 32 SMs.) More blocks per SM put more bytes in flight per SM, which is
what bounds one SM's rate (Little's law: rate = bytes in flight / latency).

    python tools/probes/sm_ceiling.py --sms 1,4,16 --blocks-per-sm 1,2,4,8 --out ceiling.json   # ~1 minute

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
CHUNK_BLOCKS = 16  # BLOCK-wide steps per claimed chunk


@triton.jit
def _smid():
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=True, pack=1)


@triton.jit
def stream_kernel(src, dst, out, counter, n_chunks, n_sms, KIND: tl.constexpr, BLOCK: tl.constexpr,
                  CHUNK: tl.constexpr):
    """Blocks on SMs below ``n_sms`` claim chunks of CHUNK x BLOCK int32 words from ``counter`` and
    stream them: of ``src`` (KIND 0: read, xor-folded, one BLOCK-wide store to ``out`` per chunk),
    of ``dst`` (1: write zeros) or from ``src`` to ``dst`` (2: copy)."""
    if _smid() < n_sms:
        lanes = tl.arange(0, BLOCK)
        c = tl.atomic_add(counter, 1)
        while c < n_chunks:
            base = c.to(tl.int64) * (CHUNK * BLOCK)
            acc = tl.zeros([BLOCK], tl.int32)
            for i in range(CHUNK):
                at = tl.max_contiguous(tl.multiple_of(base + i * BLOCK + lanes, BLOCK), BLOCK)  # so 16-byte accesses
                if KIND == 0:
                    acc ^= tl.load(src + at)
                elif KIND == 1:
                    tl.store(dst + at, acc)
                else:
                    tl.store(dst + at, tl.load(src + at))
            if KIND == 0:
                tl.store(out + c.to(tl.int64) * BLOCK + lanes, acc)
            c = tl.atomic_add(counter, 1)


def run(args, sms: list[int], per_sm: list[int]) -> int:
    import torch

    from mkernel.hw.measure.bench import time_events

    timed = lambda fn: time_events(fn, 2, args.reps) * 1e6  # median us between CUDA events, after two warm-ups
    props = torch.cuda.get_device_properties(0)
    if max(sms) > props.multi_processor_count:
        print(f"sm_ceiling: --sms asks for {max(sms)} SMs; this GPU has {props.multi_processor_count}", file=sys.stderr)
        return 2
    chunk_words = CHUNK_BLOCKS * args.block
    n_chunks = args.mib * MIB // 4 // chunk_words
    words = n_chunks * chunk_words
    src = torch.randint(-2**31, 2**31 - 1, (words,), dtype=torch.int32, device="cuda")
    dst = torch.empty_like(src)
    out = torch.empty(n_chunks * args.block, dtype=torch.int32, device="cuda")
    counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    x, y = torch.empty(512 * MIB, dtype=torch.bfloat16, device="cuda").normal_(), \
        torch.empty(512 * MIB, dtype=torch.bfloat16, device="cuda")
    d2d = 2 * x.numel() * 2 / timed(lambda: y.copy_(x)) / 1e3
    fold = src.view(n_chunks, CHUNK_BLOCKS, args.block)  # the read's reference: xor over each chunk's steps
    want = fold[:, 0].clone()
    for j in range(1, CHUNK_BLOCKS):
        want ^= fold[:, j]
    rows, failed = [], 0
    for kind in KINDS:
        for k in per_sm:
            for n in sms:
                def launch():
                    counter.zero_()
                    stream_kernel[(props.multi_processor_count * k,)](src, dst, out, counter, n_chunks, n,
                                                                      KIND=KINDS.index(kind), BLOCK=args.block,
                                                                      CHUNK=CHUNK_BLOCKS, num_warps=args.warps)
                dst.zero_()
                out.zero_()
                launch()
                torch.cuda.synchronize()
                if kind == "read":
                    ok = torch.equal(out.view(n_chunks, args.block), want)
                elif kind == "write":
                    ok = not bool(dst.any())
                else:
                    ok = torch.equal(dst, src)
                us = timed(launch)  # includes the counter's reset, a 4-byte memset
                moved = words * 4 * (2 if kind == "copy" else 1)
                rate = moved / us / 1e3
                failed += not ok
                rows.append({"kind": kind, "sms": n, "blocks_per_sm": k, "us": us, "gb_per_s": rate,
                             "gb_per_s_per_sm": rate / n, "ok": ok})
                print(f"{kind:<6} {n:>3} SMs x{k} {us:>9.1f} us {rate:>8.1f} GB/s {rate / n:>7.1f} /SM "
                      f"{'ok' if ok else 'WRONG'}", flush=True)
    report = {"date": time.strftime("%Y-%m-%d"), "machine": props.name, "command": " ".join(sys.argv),
              "block_words": args.block, "chunk_blocks": CHUNK_BLOCKS, "warps": args.warps, "mib": args.mib,
              "pinned": "blocks on SMs >= --sms leave at once", "d2d_gb_per_s": d2d, "results": rows}
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
                  f"at {best['sms']} SMs x{best['blocks_per_sm']} ({best['gb_per_s_per_sm']:.0f} GB/s per SM)")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sms", default="1,2,4,8,16,32", help="comma-separated SM counts")
    ap.add_argument("--blocks-per-sm", default="1,2,4,8", help="comma-separated blocks per SM (occupancy)")
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
