"""Which host calls hold up a proxy thread's CUDA driver calls while a kernel waits for that thread?

The emulated cluster's loopback proxy moves data with driver calls (a copy, then a flag write) from
its own thread, while the rank's main thread goes on with the user's program. If a main-thread call
holds a driver lock until the GPU drains, and the running kernel waits for the proxy, both stall
until the kernel's timeout. This probe measures it directly, one scenario per fresh process:

1. a one-block kernel spins on a flag (bounded: ``--spin-s``), recording when it saw it;
2. a helper thread sleeps 0.3 s, then issues a device copy and a stream write of the flag on its
   own non-blocking stream (what the proxy does), timing each driver call;
3. meanwhile the main thread runs the scenario (``SCENARIOS``), e.g. a blocking copy to the host.

A scenario is harmless when the kernel saw the flag about 0.3 s in; it stalls the proxy when the
kernel saw it only at its timeout (or never). ``--own-context`` gives the helper a context of its
own (cuCtxCreate) instead of the device's primary one: does that decouple it?

    python docs/results/data/reliability-hw-2026-12-01-d/host_block_probe.py [--mps] [--loading EAGER|LAZY] [--own-context] --out $OUT/probe.json
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import threading
import time

SCENARIOS = ("none", "sync", "event_sync", "cpu_copy", "item", "first_matmul", "new_triton_kernel", "malloc",
             "launch_flood")


def _spin_kernel():
    import triton
    import triton.language as tl

    from mkernel.hw.kernels.sync import _clock

    @triton.jit
    def spin(flag, out, timeout_ns):
        t0 = _clock()
        seen = tl.load(flag, volatile=True)
        while (seen == 0) & (_clock() - t0 < timeout_ns):
            seen = tl.load(flag, volatile=True)
        tl.store(out, _clock() - t0)
        tl.store(out + 1, seen.to(tl.int64))

    return spin


def _helper(cu, ctx, stream, flag_ptr: int, src: int, dst: int, times: dict) -> None:
    """The proxy's two calls, each timed: a device-to-device copy, then the flag's stream write."""
    time.sleep(0.3)
    cu.cuCtxSetCurrent(ctx)
    t = time.perf_counter()
    times["copy_rc"] = cu.cuMemcpyDtoDAsync_v2(ctypes.c_uint64(dst), ctypes.c_uint64(src), ctypes.c_size_t(1 << 20),
                                               stream)
    times["copy_call_s"] = time.perf_counter() - t
    t = time.perf_counter()
    times["write_rc"] = cu.cuStreamWriteValue32_v2(stream, ctypes.c_uint64(flag_ptr), ctypes.c_uint32(1),
                                                   ctypes.c_uint(0))
    times["write_call_s"] = time.perf_counter() - t
    times["helper_done_s"] = time.perf_counter()


def one(scenario: str, spin_s: float, own_context: bool) -> dict:
    """Run one scenario in this process (fresh: first uses are first uses)."""
    import torch

    dev = torch.device("cuda", 0)
    torch.cuda.init()
    spin = _spin_kernel()
    flag = torch.ones(1, dtype=torch.int32, device=dev)
    out = torch.zeros(2, dtype=torch.int64, device=dev)
    spin[(1,)](flag, out, 1000, num_warps=1)  # compiled and loaded before the scenario
    src, dst = torch.randn(1 << 18, device=dev), torch.empty(1 << 18, device=dev)
    y = torch.randn(4096, 1024, device=dev)
    torch.cuda.synchronize()
    cu = ctypes.CDLL("libcuda.so.1")
    ctx, stream = ctypes.c_void_p(), ctypes.c_void_p()
    if own_context:
        create = getattr(cu, "cuCtxCreate_v2", None)
        rc = create(ctypes.byref(ctx), 0, 0) if create else cu.cuCtxCreate_v4(ctypes.byref(ctx), None, 0, 0)
        cu.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
        if rc:
            return {"scenario": scenario, "error": f"cuCtxCreate: {rc}"}
    else:
        cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0)
    cu.cuCtxPushCurrent_v2(ctx)
    cu.cuStreamCreate(ctypes.byref(stream), 1)  # CU_STREAM_NON_BLOCKING
    cu.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
    flag.zero_()
    torch.cuda.synchronize()
    spin[(1,)](flag, out, int(spin_s * 1e9), num_warps=1)
    times: dict = {}
    helper = threading.Thread(target=_helper, args=(cu, ctx, stream, flag.data_ptr(), src.data_ptr(), dst.data_ptr(),
                                                    times))
    t0 = time.perf_counter()
    helper.start()
    if scenario == "sync":
        torch.cuda.synchronize()
    elif scenario == "event_sync":
        e = torch.cuda.Event()
        e.record()
        e.synchronize()
    elif scenario == "cpu_copy":
        y.cpu()
    elif scenario == "item":
        y.sum().item()
    elif scenario == "first_matmul":
        y @ y.T
    elif scenario == "new_triton_kernel":
        import triton
        import triton.language as tl

        @triton.jit
        def bump(x):
            tl.store(x, tl.load(x) + 1)

        bump[(1,)](y)
    elif scenario == "malloc":
        torch.empty(1 << 31, dtype=torch.uint8, device=dev)
    elif scenario == "launch_flood":
        for _ in range(20000):
            y[:1].add_(1)
    action_s = time.perf_counter() - t0
    helper.join(timeout=spin_s + 30)
    torch.cuda.synchronize()
    elapsed_ns, seen = out.tolist()
    return {"scenario": scenario, "own_context": own_context, "action_s": round(action_s, 3),
            "kernel_saw_flag": bool(seen), "kernel_waited_s": round(elapsed_ns / 1e9, 3),
            "copy_call_s": round(times.get("copy_call_s", -1), 4), "write_call_s": round(times.get("write_call_s", -1), 4),
            "rcs": [times.get("copy_rc"), times.get("write_rc")], "stalled": not seen or elapsed_ns / 1e9 > 1.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--spin-s", type=float, default=3.0)
    ap.add_argument("--mps", action="store_true", help="under an MPS daemon, 25%% of the SMs (as an emulated rank)")
    ap.add_argument("--loading", default="EAGER", choices=("EAGER", "LAZY"))
    ap.add_argument("--own-context", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.one, a.spin_s, a.own_context)))
        return
    from pathlib import Path
    import tempfile

    from mkernel.hw.runtime.emulate import Mps
    from mkernel.hw.runtime.safety import apply_no_multicast

    env = apply_no_multicast(dict(os.environ))
    env["CUDA_MODULE_LOADING"] = a.loading
    rows = []
    with tempfile.TemporaryDirectory(prefix="mkernel-probe-") as root:
        mps = Mps(Path(root)) if a.mps else None
        if mps:
            mps.__enter__()
            env.update(mps.env, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="25")
        try:
            for s in a.scenarios.split(","):
                cmd = [sys.executable, __file__, "--one", s, "--spin-s", str(a.spin_s)] + (
                    ["--own-context"] if a.own_context else [])
                res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.spin_s + 120)
                row = json.loads(res.stdout.strip().splitlines()[-1]) if res.returncode == 0 else {
                    "scenario": s, "error": res.stderr[-600:]}
                rows.append(row | {"mps": a.mps, "loading": a.loading})
                print(json.dumps(rows[-1]), flush=True)
        finally:
            if mps:
                mps.__exit__(None, None, None)
    if a.out:
        Path(a.out).write_text(json.dumps({"commit": os.environ.get("MKERNEL_COMMIT", ""), "argv": sys.argv,
                                           "rows": rows}, indent=1))
    print(f"{'scenario':18} {'stalled':8} {'saw at s':9} {'copy call s':12} {'write call s':12}")
    for r in rows:
        print(f"{r['scenario']:18} {str(r.get('stalled', r.get('error', '')[:40])):8} {r.get('kernel_waited_s', ''):<9} "
              f"{r.get('copy_call_s', ''):<12} {r.get('write_call_s', '')}")


if __name__ == "__main__":
    main()
