"""Where the ring -> proxy -> loopback path stops (2026-12-05: `mkernel calibrate`'s proxy section hung in its
first stream, 64 blocks x 256 signal commands, max_batch 1). Each case runs in its own process with a short
device timeout and a host limit, smallest first, and prints one line: rate, error record, proxy counters."""
from __future__ import annotations

import json
import multiprocessing as mp
import sys

WARPS = [  # (name, blocks, warps per block): does the cliff follow the blocks or the threads polling?
    (f"stream {b}x256 signal w{w}", "stream", dict(n_blocks=b, chunks_per_block=256, signal_only=True, epochs=1, warps=w))
    for b, w in ((16, 8), (32, 8), (64, 1), (64, 2), (64, 4), (128, 1))]
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def _ld_volatile(addr):  # a relaxed poll in place of ld.acquire.sys
    return tl.inline_asm_elementwise("ld.volatile.global.u64 $0, [$1];", "=l,l", [addr], dtype=tl.int64,
                                     is_pure=False, pack=1)


@triton.jit
def _ld_acquire_napping(addr):  # every poll after a 2 us sleep
    tl.inline_asm_elementwise("nanosleep.u32 2000; mov.u32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
    return tl.inline_asm_elementwise("ld.acquire.sys.global.u64 $0, [$1];", "=l,l", [addr], dtype=tl.int64,
                                     is_pure=False, pack=1)


@triton.jit
def _ld_volatile_napping(addr):
    tl.inline_asm_elementwise("nanosleep.u32 2000; mov.u32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
    return tl.inline_asm_elementwise("ld.volatile.global.u64 $0, [$1];", "=l,l", [addr], dtype=tl.int64,
                                     is_pure=False, pack=1)


POLLS = [  # the same 64 x 256 stream, the polls of every wait replaced (sync._ld_acquire patched before compiling)
    (f"stream 64x256 signal {name}", "stream", dict(n_blocks=64, chunks_per_block=256, signal_only=True, epochs=1,
                                                    poll=name))
    for name in ("acquire", "volatile", "acquire_nap2us", "volatile_nap2us")]
CASES = [
    ("roundtrip host-flags", "roundtrip", dict(n=200, host_flags=True)),
    ("roundtrip put", "roundtrip", dict(n=200, nbytes=64)),
    ("stream 1x16 signal", "stream", dict(n_blocks=1, chunks_per_block=16, signal_only=True, epochs=1)),
    ("stream 1x256 signal", "stream", dict(n_blocks=1, chunks_per_block=256, signal_only=True, epochs=1)),
    ("stream 8x256 signal", "stream", dict(n_blocks=8, chunks_per_block=256, signal_only=True, epochs=1)),
    ("stream 64x256 signal", "stream", dict(n_blocks=64, chunks_per_block=256, signal_only=True, epochs=1)),
    ("stream 64x256 signal b1", "stream", dict(n_blocks=64, chunks_per_block=256, signal_only=True, epochs=1, max_batch=1)),
    ("stream 64x64 put", "stream", dict(n_blocks=64, chunks_per_block=64, chunk_bytes=64, epochs=1)),
]


def _one(fn: str, kw: dict, q) -> None:
    try:
        from mkernel.hw.measure import selftest
        if fn == "stream":
            kw = {**kw, "timeout_s": 1.0}
        if "poll" in kw:
            from mkernel.hw.kernels import sync
            poll = kw.pop("poll")
            sync._ld_acquire = {"acquire": sync._ld_acquire, "volatile": _ld_volatile, "acquire_nap2us": _ld_acquire_napping,
                                "volatile_nap2us": _ld_volatile_napping}[poll]
        if "warps" in kw:  # the launch's warps per block (selftest._run's keyword-only default)
            selftest._run.__kwdefaults__ = {"num_warps": kw.pop("warps")}
        r = getattr(selftest, fn)(**kw)
        q.put({k: r.get(k) for k in ("cmds_per_s", "p50_us", "completed", "mismatches", "error", "main_loops")}
              | {"proxy": {k: v for k, v in (r.get("proxy") or {}).items() if not isinstance(v, (list, dict))}})
    except BaseException as exc:  # report it, whatever it is
        q.put({"exception": f"{type(exc).__name__}: {exc}"[:400]})


def main() -> None:
    ctx = mp.get_context("spawn")
    for name, fn, kw in (WARPS if "--warps" in sys.argv else POLLS if "--polls" in sys.argv else CASES):
        q = ctx.Queue()
        p = ctx.Process(target=_one, args=(fn, kw, q))
        p.start()
        p.join(45)
        if p.is_alive():
            p.kill()
            print(f"{name:26s} HUNG (killed after 45 s)", flush=True)
            continue
        print(f"{name:26s} {json.dumps(q.get(timeout=5) if not q.empty() else {'exit': p.exitcode})[:600]}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
