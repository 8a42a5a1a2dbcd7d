"""Benchmark of the hw runtime's command path on one GPU: ring -> native proxy -> loopback -> flag.

Reports, with the Python main thread idle and busy (a pure-Python loop holding the GIL), for three
tiers of the path (TIERS below):
- round trip: one command at a time, GPU enqueue -> proxy -> (copy +) flag -> flag seen on the GPU;
- throughput: 64 producer blocks pushing commands, commands per second with batching.
The baseline in the same run is the idle-main-thread case: a GIL-bound proxy would show the gap.
Targets (issue 5): p50 <= 5 us and p99 <= 50 us busy; >= 500k commands/s.

    python tools/bench/bench_proxy.py --out results.json
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path


# What each tier adds to the path: the proxy alone (flags in pinned host memory, set by the proxy
# thread), plus the CUDA driver (a stream write-value per batch), plus the copy engine (64-byte PUTs).
TIERS = {
    "proxy only": dict(host_flags=True),
    "loopback SIGNAL": dict(signal_only=True),
    "loopback PUT 64B": dict(),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="write every measurement as JSON here")
    ap.add_argument("--iters", type=int, default=20_000, help="round trips per case")
    ap.add_argument("--commit", default=None, help="the commit measured (default: the .commit file, see tools/device/gpu_check.sh)")
    args = ap.parse_args()
    if args.commit is None and Path(".commit").is_file():  # written by the caller: a device copy has no history
        args.commit = Path(".commit").read_text().strip()
    from mkernel.hw.measure import selftest
    from mkernel.hw.runtime import safety

    safety.apply_no_multicast()
    import torch

    selftest.roundtrip(n=500)  # warm-up: build, load, first launches
    rows, raw = [], {}
    for tier, kw in TIERS.items():
        for busy in (False, True):
            r = selftest.roundtrip(n=args.iters, busy_main=busy, **kw)
            raw[f"roundtrip {tier} busy={busy}"] = r
            p = r["proxy"]
            rows.append((f"round trip, {tier}, main {'busy' if busy else 'idle'}", f"p50 {r['p50_us']:.2f} us",
                         f"p99 {r['p99_us']:.2f} us", f"max {r['max_after_100_us']:.1f} us"))
    pin = max(os.sched_getaffinity(0))  # the last CPU this process may use
    for tier, kw in TIERS.items():  # the rare ms outliers: is it the scheduler moving the proxy thread?
        r = selftest.roundtrip(n=args.iters, busy_main=True, cpu=pin, **kw)
        raw[f"roundtrip {tier} busy=True pinned"] = r
        rows.append((f"round trip, {tier}, busy, proxy on CPU {pin}", f"p50 {r['p50_us']:.2f} us",
                     f"p99 {r['p99_us']:.2f} us", f"max {r['max_after_100_us']:.1f} us"))
    for tier, kw in TIERS.items():
        for busy in (False, True):
            s = selftest.stream(n_blocks=64, chunks_per_block=256, chunk_bytes=64, epochs=3, busy_main=busy, **kw)
            raw[f"stream {tier} busy={busy}"] = s
            p = s["proxy"]
            rows.append((f"throughput, {tier}, main {'busy' if busy else 'idle'}", f"{s['cmds_per_s'] / 1e3:.0f}k cmd/s",
                         f"{p['commands'] / max(p['batches'], 1):.2f} cmd/batch",
                         (f"{p['transport_ns'] / p['driver_calls'] / 1e3:.1f} us/driver call" if p["driver_calls"]
                          else "no driver calls") + f", bad {s['mismatches']}"))
    meta = {"date": time.strftime("%Y-%m-%d"), "gpu": torch.cuda.get_device_name(), "commit": args.commit,
            "iters": args.iters}
    if args.out:
        args.out.write_text(json.dumps({"meta": meta, "results": raw}, indent=1, default=str))
    print(f"# proxy benchmark on {meta['gpu']} ({meta['date']})")
    for row in rows:
        print(" | ".join(f"{c:<42}" if i == 0 else f"{c:>16}" for i, c in enumerate(row)))


if __name__ == "__main__":
    main()
