"""The ``mkernel`` command: its parser and its entry point. Subcommands only parse, call the public
API, and print; they live in :mod:`mkernel.cli_run` (those that build and run scenarios) and
:mod:`mkernel.cli_measure` (those that measure or inspect GPUs and NICs, and ``accuracy``).

Exit codes: 0 success, 1 a failed check (wrong output, an invalid schedule, a deadlock),
2 bad input (scenario, flags, an unavailable backend). Errors are one sentence on stderr; ``--debug``
adds the traceback.
"""
from __future__ import annotations

import argparse
import atexit
import os
import sys
import threading
from pathlib import Path

# numpy's OpenBLAS starts a worker thread for each core but one as numpy loads, and an idle worker
# spins 2**28 cycles (about 0.1 s of a core) before it sleeps: after the load and after every BLAS
# call. The command makes no BLAS call that needs a spinning worker, so its idle workers sleep at
# once (OpenBLAS's shortest timeout, 2**4 cycles; a value already set stays): a third of `mkernel
# run`'s CPU. Here, before the imports below load numpy (importing mkernel itself does not).
OPENBLAS_THREAD_TIMEOUT = "4"
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", OPENBLAS_THREAD_TIMEOUT)
# numpy asks the kernel for transparent huge pages for each array of 4 MB or more. Where the kernel
# then compacts memory to find one (THP defrag "madvise", as on our 2-core machines), a fault can
# stall for tens of microseconds: `mkernel run` of the 2 x 8 every-node GEMM+AR spent 0.45 s of
# system time with them against 0.28 s with plain pages (mean of 8 alternating runs; its arrays live
# for a phase each, so huge pages save little else). The command's own process opts out (a value
# already set stays); the library leaves numpy's setting alone.
NUMPY_MADVISE_HUGEPAGE = "0"
os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", NUMPY_MADVISE_HUGEPAGE)

from . import cli_measure as measure  # noqa: E402
from . import cli_run as cases  # noqa: E402
from .cluster import HW_TRANSPORTS, KERNEL_PROFILES, NOTIFY_MODES, TRANSPORTS  # noqa: E402
from .errors import BackendUnavailable, InputError, MkernelError  # noqa: E402
from .limits import TIMEOUT_S, bounded  # noqa: E402
from .problems import INTERNODE, KERNELS, NODE_REDUCES, SCHEDULES  # noqa: E402


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mkernel", description="Fused multi-GPU compute+communication kernels.")
    sub = p.add_subparsers(dest="command", required=True)
    shared = argparse.ArgumentParser(add_help=False)
    shared.add_argument("scenario", nargs="?", help="a scenario TOML file or bundled name (default: default)")
    shared.add_argument("--kernel", choices=KERNELS)
    shared.add_argument("--nodes", type=int)
    shared.add_argument("--gpus-per-node", type=int)
    shared.add_argument("--transport", choices=TRANSPORTS + HW_TRANSPORTS,
                        help="sim: the NIC protocol; hw names (auto, loopback, verbs_rc, verbs_srd, ofi) run on --backend hw "
                             "and are simulated as their protocol")
    shared.add_argument("--notify", choices=NOTIFY_MODES, help="how a receiver learns a chunk landed")
    shared.add_argument("--m", type=int)
    shared.add_argument("--n", type=int)
    shared.add_argument("--k", type=int)
    shared.add_argument("--tokens", type=int, help="moe_dispatch_gemm: total tokens")
    shared.add_argument("--seq", type=int, help="ring_attention: sequence per GPU")
    shared.add_argument("--causal", action="store_true", help="ring_attention: causal, zigzag-balanced")
    shared.add_argument("--internode", choices=INTERNODE,
                        help="the GEMM ops' algorithm over the rails: gemm_ar direct, twoshot or ring; ag_gemm direct "
                             "or ring; gemm_rs direct (auto: by node count, mkernel/builders/_rail.py)")
    shared.add_argument("--schedule", choices=SCHEDULES,
                        help="what a run executes: fused (the default), the op's baseline, or auto: the fused one where "
                             "it is faster than the baseline, both simulated (mkernel/builders/_auto.py)")
    shared.add_argument("--node-reduce", choices=NODE_REDUCES,
                        help="gemm_rs, gemm_ar: how a node owner gets its node's partials: pull (peer loads, the default) "
                             "or push (each peer reduce-adds its partial into the owner; gemm_ar then broadcasts the owner's "
                             "final tile: mkernel/builders/_gemm_rs_push.py, _gemm_ar_push.py)")
    shared.add_argument("--force", action="store_true",
                        help="go on with a problem beyond the memory limit (mkernel/limits.py) instead of refusing it")
    shared.add_argument("--debug", action="store_true", help="show tracebacks")
    shared.add_argument("--timeout", type=float, default=None,
                        help="stop after this many seconds, saying what was still running, and exit 1 (0: no limit; "
                             "default: run 1200, explore 600)")
    run = sub.add_parser("run", parents=[shared], help="run fused op and baseline, print the result")
    run.add_argument("--backend", choices=("sim", "hw"), default="sim")
    run.add_argument("--kernels", choices=KERNEL_PROFILES,
                     help="sim: the fused kernel's compute speed: measured (our kernels, calibrated) or reference "
                          "(cuBLAS / SDPA speed); default: the scenario's [cluster] kernels, else measured")
    run.add_argument("--data", action="store_true", help="run on real numbers and check against the numpy reference")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--json", type=Path, help="write the result JSON here")
    run.add_argument("--trace", type=Path, help="write a Chrome/Perfetto trace of the fused run here")
    run.add_argument("--splits", type=Path, help="a splits.json from `mkernel sweep --comm-sms`: use its best static "
                                                 "split for this op and shape")
    run.add_argument("--faults", help="seeded faults: sim, e.g. 'drop=0.1,delay_us=5,duplicate=0.2,seed=3' "
                                      "(keys: mkernel.sim.faults); hw (the host proxy, 2+ nodes), e.g. "
                                      "'reorder=1,delay_us=20,drop=0.01,die_after=100,seed=3'")
    run.add_argument("--heap", choices=("device", "host"),
                     help="hw: the fused run's symmetric buffer in GPU memory (default) or in mapped pinned host "
                          "memory, for a --transport whose NIC cannot reach GPU memory (slow, exact)")
    run.add_argument("--adaptive", action="store_true",
                     help="run the fused op under the adaptive SM partition (compute <-> intra SMs; sim and hw)")
    run.add_argument("--collapse", action=argparse.BooleanOptionalAction, default=None,
                     help="sim: simulate one node when all nodes are alike (exact times, no hazard checks); "
                          "the default where no --data, --trace, --faults or racy protocol asks for every node")
    sub.add_parser("show", parents=[shared], help="print the schedule's roles, tiles, chunks and bytes")
    sub.add_parser("explore", parents=[shared],
                   help="try every network delivery order of a small case (<= 2 x 2 GPUs, <= 8 messages in flight)")
    sw = sub.add_parser("sweep", help="run a grid of sim points (ops x sizes x scenarios x options) on worker "
                                      "processes, resumably (default: the reference grid, each op at five sizes: mkernel/sweep.py)")
    sw.add_argument("--out", type=Path, default=Path("sweep-results"), help="folder for results.jsonl/csv/json and the plot")
    sw.add_argument("--grid", choices=("reference", "scaling"), default="reference",
                    help="reference: five per-GPU shapes per op, as at world 16; scaling: the scale-out study (docs/scaling.md)")
    sw.add_argument("--testbeds", "--scenarios", nargs="*", default=None,
                    help="scenario names, files or globs over bundled names, e.g. 'scaleout/ib-400g-rail-*' "
                         "(default: both paper testbeds)")
    sw.add_argument("--kernels", nargs="*", choices=KERNELS, default=None)
    sw.add_argument("--sizes", type=int, default=None, help="only the first N sizes of each op")
    sw.add_argument("--set", action="append", default=[], metavar="KEY=V1,V2",
                    help="an option swept over its values (repeatable; the grid takes every combination): a "
                         "workload key (internode, chunk_tiles, routing, baseline), a cluster key (transport, "
                         "notify), SPEC.KEY (proxy.batch, nic.gbit_per_s, fabric.oversubscription) or controller")
    sw.add_argument("--workers", type=int, default=1, help="worker processes (each runs whole points)")
    sw.add_argument("--backend", choices=("sim", "hw"), default="sim",
                    help="with --comm-sms: run the static splits on this backend (hw: the GPUs at hand)")
    sw.add_argument("--comm-sms", default=None, help="static SM splits instead: e.g. 1,2,4,8,16,32,64 intra SMs per "
                                                     "point; prints each curve and writes splits.json")
    sw.add_argument("--debug", action="store_true", help="show tracebacks")
    sw.add_argument("--timeout", type=float, default=None,
                    help="stop after this many seconds (default 7200; 0: none); finished points stay logged, so "
                         "the same command resumes")
    so = sub.add_parser("scaleout", help="write the scale-out what-if scenarios (2-64 nodes, IB RC / EFA SRD, "
                                         "400/800 Gb/s, rail / 2:1 spine, GB200-class) as TOML files")
    so.add_argument("--out", type=Path, default=Path("scenarios/scaleout"), help="the folder to write")
    so.add_argument("--list", action="store_true", help="only list the scenario names")
    so.add_argument("--debug", action="store_true", help="show tracebacks")
    st = sub.add_parser("selftest", help="check the hw runtime on the GPUs at hand (emulating nodes when ranks "
                                         "outnumber GPUs)")
    st.add_argument("--nodes", type=int, default=2)
    st.add_argument("--gpus-per-node", type=int, default=2)
    st.add_argument("--shaped", action="store_true", help="shape the loopback like a 50 GB/s SRD NIC")
    st.add_argument("--debug", action="store_true", help="show tracebacks")
    st.add_argument("--timeout", type=float, default=None, help="stop every rank after this many seconds "
                                                                 "(default 600; 0: none)")
    cal = sub.add_parser("calibrate", help="microbenchmark the GPU at hand and write a hardware profile (TOML)")
    cal.add_argument("--out", type=Path, default=Path("calibrated.toml"),
                     help="the profile to write (default: calibrated.toml here; a bundled profile such as "
                          "scenarios/hardware/h200.toml is written only when named)")
    cal.add_argument("--raw", type=Path, help="also write the raw measurements (JSON; `mkernel accuracy` reads them)")
    cal.add_argument("--commit", help="the commit measured (default: git, or the .commit file)")
    cal.add_argument("--only", nargs="+", choices=("gpu", "proxy", "peer"), default=None,
                     help="measure only these sections (an existing profile at --out keeps every key this run "
                          "does not measure, e.g. the NVLink terms on one GPU)")
    cal.add_argument("--debug", action="store_true", help="show tracebacks")
    cal.add_argument("--timeout", type=float, default=None, help="stop after this many seconds (default 1800; 0: none)")
    be = sub.add_parser("bench", help="time the fused ops against NCCL, torch async-TP and the matmul ceiling")
    be.add_argument("--out", type=Path, default=Path("bench-results"), help="folder for bench.json and bench.png")
    be.add_argument("--kernels", nargs="*", choices=KERNELS, default=None)
    be.add_argument("--sizes", type=int, default=None, help="only the first N grid sizes of each op")
    be.add_argument("--emulate", help="NODESxGPUS ranks sharing this host's GPUs under MPS, e.g. 2x2")
    be.add_argument("--iters", type=int, default=20, help="timed calls per implementation")
    be.add_argument("--debug", action="store_true", help="show tracebacks")
    be.add_argument("--timeout", type=float, default=None, help="stop every rank after this many seconds "
                                                                 "(default 3600; 0: none)")
    va = sub.add_parser("accuracy", aliases=["validate"],  # validate: its old name (deprecated)
                        help="the simulator's error against calibrate and bench measurements")
    va.add_argument("--calibration", type=Path, required=True, help="raw JSON of `mkernel calibrate --raw`")
    va.add_argument("--bench", type=Path, nargs="*", default=[], help="bench.json files of `mkernel bench`")
    va.add_argument("--runs", type=Path, nargs="*", default=[],
                    help="result JSONs of `mkernel run --backend hw --json` on an emulated cluster (ranks sharing one GPU)")
    va.add_argument("--splits", type=Path, nargs="*", default=[],
                    help="splits tables of tools/studies/hw_splits.py (static splits measured on real NVLink)")
    va.add_argument("--profile", default="h200", help="the hardware profile the simulator uses (path or bundled name)")
    va.add_argument("--out", type=Path, help="write the report as JSON here")
    va.add_argument("--fit-overheads", action="store_true",
                    help="also fit the fused kernel's per-call and per-tile costs from the world-1 bench (printed)")
    va.add_argument("--debug", action="store_true", help="show tracebacks")
    dr = sub.add_parser("doctor", help="RDMA devices, ports, GIDs, EFA caps, dmabuf, libfabric providers, the NIC per "
                                       "GPU and the transport auto picks")
    dr.add_argument("--require", choices=("auto", "verbs_rc", "verbs_srd", "ofi"),
                    help="end with PASS or FAIL for this transport (exit 0 or 1)")
    dr.add_argument("--nic-map", help="GPU=NIC pairs, e.g. 0=mlx5_0,1=mlx5_1 (default: nearest by PCIe distance)")
    dr.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def main(argv: list[str] | None = None) -> int:
    from mkernel.hw.runtime.safety import apply_no_multicast  # the process's entry: before anything starts CUDA

    apply_no_multicast()
    args = _parser().parse_args(argv)
    try:
        commands = {"run": cases.run, "show": cases.show, "explore": cases.explore, "sweep": cases.sweep,
                    "scaleout": cases.scaleout, "selftest": measure.selftest, "calibrate": measure.calibrate,
                    "bench": measure.bench, "accuracy": measure.accuracy, "validate": measure.validate,
                    "doctor": measure.doctor}
        if args.command not in TIMEOUT_S:
            return commands[args.command](args)
        timeout = TIMEOUT_S[args.command] if args.timeout is None else args.timeout
        with bounded(f"mkernel {args.command}", timeout):
            return commands[args.command](args)
    except MkernelError as exc:
        if args.debug:
            raise
        print(f"mkernel: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, (InputError, BackendUnavailable)) else 1


def entry() -> None:
    """The ``mkernel`` process: :func:`main`, then its exit. A simulated run leaves millions of
    objects (its schedules, tables and logs) for the interpreter to free one by one as it shuts
    down, after the answer is printed: 40 ms of the 2 x 8 every-node row. Where the command
    registered nothing to run at exit (no worker pool, temporary directory or GPU runtime: those
    register their clean-up), left no other thread running (one the interpreter would wait for),
    and no profiler, tracer, coverage tool or debugger watches the process (``python -m cProfile
    -m mkernel`` reports after the command returns), the output is flushed and the process ends
    at once, and the OS takes the memory back; else it exits as usual. (Exit callbacks registered
    before the command, by the interpreter's site set-up, are skipped with the rest.)"""
    registered = atexit._ncallbacks()  # (CPython's count of exit callbacks)
    code = main()
    watched = sys.gettrace() is not None or sys.getprofile() is not None
    if watched or atexit._ncallbacks() != registered or threading.active_count() > 1:
        sys.exit(code)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
