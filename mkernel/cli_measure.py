"""The ``mkernel`` subcommands that measure on GPUs or inspect the host's NICs, and the one that
checks the simulator against those measurements: ``calibrate``, ``bench``, ``selftest``, ``doctor``
and ``accuracy``. Like the rest of the command line (:mod:`mkernel.cli`), they only parse, call the
library, and print."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .errors import BackendUnavailable, InputError
from .files import output_file, output_folder
from .problems import KERNELS


def commit(given: str | None) -> str:
    import subprocess

    if given:
        return given
    if Path(".commit").is_file():  # written by the caller where the tree has no git history
        return Path(".commit").read_text().strip()
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def gpu_ready() -> None:
    from mkernel import hw

    reason = hw.unavailable()
    if reason:
        raise BackendUnavailable(reason)


def calibrate(args: argparse.Namespace) -> int:
    output_file(args.out, "--out")
    output_file(args.raw, "--raw")
    if args.out.exists():  # merged into: a file of another kind is refused before the microbenchmarks
        from .scenario import load_profile

        load_profile(str(args.out.resolve()), f"calibrate --out {args.out}")
    gpu_ready()
    from mkernel.studies import profile
    from mkernel.hw.measure import calibrate

    from mkernel.hw.runtime.safety import apply_rendezvous

    apply_rendezvous("calibrate")  # calibrate starts a world-1 group where none runs
    command = "mkernel calibrate " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["calibrate"] else "mkernel calibrate"
    only = tuple(args.only or calibrate.SECTIONS)
    raw = calibrate.run(commit(args.commit), command.strip(), progress=lambda m: print(m, file=sys.stderr), only=only)
    if args.raw:
        args.raw.write_text(json.dumps(raw, indent=1) + "\n")
    doc = profile.write(raw, args.out, merge=True)
    for table in ("gpu", "proxy", "nic", "nvlink"):
        for key, value in doc.get(table, {}).items():
            print(f"{table}.{key} = {value}    # {doc['provenance'][f'{table}.{key}']['bench']}")
    print(f"profile: {args.out}")
    return 0


def parse_emulate(spec: str | None) -> tuple[int, int] | None:
    if spec is None:
        return None
    try:
        nodes, gpn = (int(x) for x in spec.lower().split("x"))
    except ValueError:
        raise InputError(f"--emulate {spec!r}: NODESxGPUS, e.g. 2x2") from None
    if nodes < 1 or gpn < 1:
        raise InputError(f"--emulate {spec!r}: nodes and GPUs must be >= 1")
    return nodes, gpn


def torchrun_ranks() -> tuple[int, int, int, int]:
    """(rank, world, local rank, ranks per node) from torchrun's environment, or one rank outside
    torchrun; the rendezvous defaults to bench's own port where torchrun set none."""
    from mkernel.hw.runtime.safety import apply_rendezvous

    env = apply_rendezvous("bench")
    world = int(env.get("WORLD_SIZE", "1"))
    return (int(env.get("RANK", "0")), world, int(env.get("LOCAL_RANK", "0")),
            int(env.get("LOCAL_WORLD_SIZE", str(world))))


def bench(args: argparse.Namespace) -> int:
    output_folder(args.out, "--out")
    emulate = parse_emulate(args.emulate)
    if args.sizes is not None and args.sizes < 1 or args.iters < 1:
        raise InputError("--sizes and --iters must be >= 1")
    gpu_ready()
    from mkernel.hw.measure import bench

    points = bench.grid(args.kernels or KERNELS, args.sizes)
    result = bench.run(points, emulate=emulate, ranks=torchrun_ranks(), iters=args.iters)
    if result is None:  # a rank other than 0 under torchrun
        return 0
    result["commit"] = commit(None)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench.json").write_text(json.dumps(result, indent=1) + "\n")
    print("\n".join(bench.table(result)))
    figure = bench.plot(result, args.out / "bench.png")
    print(f"results: {args.out / 'bench.json'}" + (f", plot: {figure}" if figure else ""))
    ok = all(x.get("ok", True) for r in result["rows"] for x in r["impls"].values())
    return 0 if ok else 1


def validate(args: argparse.Namespace) -> int:
    """`mkernel validate`, the old name of `mkernel accuracy` (kept for one release): it said
    "validate" beside :meth:`mkernel.ir.Schedule.validate`, which checks schedules, not the simulator."""
    print("mkernel: `mkernel validate` is deprecated and goes in the next release; use `mkernel accuracy` "
          "(same options)", file=sys.stderr)
    return accuracy(args)


def accuracy(args: argparse.Namespace) -> int:
    """`mkernel accuracy`: the simulator's error against calibrate, bench, run and split measurements."""
    from mkernel.studies import accuracy
    from mkernel.studies.splits import read_measured

    output_file(args.out, "--out")
    def read(path: Path) -> dict:
        try:
            doc = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise InputError(f"{path}: cannot read it as JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise InputError(f"{path}: a JSON object expected, got {type(doc).__name__}")
        return doc

    benches = [(str(p), read(p)) for p in args.bench]
    splits = [(str(p), read_measured(read(p), str(p))) for p in args.splits]
    if args.fit_overheads:
        worlds = [b for _, b in benches if b.get("world") == 1 and not b.get("emulated")]
        if not worlds and not splits:
            raise InputError("--fit-overheads needs a world-1 --bench (mkernel bench on one GPU) or a --splits run")
        if worlds:
            call, task = accuracy.fit_overheads(worlds[0], accuracy.profile_cluster(args.profile, 1, 1))
            print(f"fitted: gpu.fused_call_us = {call:.3f}  gpu.fused_tile_us = {task:.4f} (put them in the profile)")
        for where, sp in splits:
            accuracy.check_splits(where, sp)
            fit = accuracy.fit_peer_costs(sp, accuracy.profile_cluster(args.profile, 1, sp["world"]))
            print(f"fitted on {where}: " + "  ".join(f"{k} = {v:.4g}" for k, v in fit.items())
                  + " (put them in the profile)")
    report = accuracy.measure_error(args.profile, (str(args.calibration), read(args.calibration)), benches,
                               [(str(p), read(p)) for p in args.runs], splits)
    for r in report["rows"]:
        print(f"{r['group']:<13} {r['config']:<62} measured {r['measured_us']:>10.1f} us  "
              f"sim {r['predicted_us']:>10.1f} us  {r['error']:+.1%}")
    for g, st in {**report["groups"], "overall": report["overall"]}.items():
        rho = "n/a" if st["spearman"] is None else f"{st['spearman']:.3f}"
        print(f"{g:<13} {st['configs']:>3} configs  MAPE {st['mape']:.1%}  p90 {st['p90']:.1%}  "
              f"mean {st['mean_signed']:+.1%}  rank correlation {rho}")
    for c in report["curves"]:
        rho = "n/a" if c["spearman"] is None else f"{c['spearman']:.3f}"
        print(f"{c['curve']:<26} split order rank correlation {rho}; best on the GPU: {c['best_measured']}; "
              f"the simulator's pick costs {c['sim_pick_over_best']:.2f}x the best there")
    print(f"largest error term: {report['dominant_group']}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


def selftest(args: argparse.Namespace) -> int:
    if args.nodes < 1 or args.gpus_per_node < 1:
        raise InputError(f"--nodes {args.nodes} and --gpus-per-node {args.gpus_per_node} must be >= 1")
    from mkernel import hw

    reason = hw.unavailable()
    if reason:
        raise BackendUnavailable(reason)
    from mkernel.hw.measure import selftest
    from mkernel.hw.runtime import emulate

    rows = selftest.summary(args.nodes, args.gpus_per_node, args.shaped)
    for name, ok, detail in rows:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    print(f"note: {emulate.EMULATION_NOTE}")
    return 0 if all(ok for _, ok, _ in rows) else 1


def doctor(args: argparse.Namespace) -> int:
    from mkernel.hw.measure import doctor
    from mkernel.hw.runtime import nics

    lines, ok = doctor.report(nic_map=nics.parse_nic_map(args.nic_map) if args.nic_map else None, require=args.require)
    print("\n".join(lines))
    return 0 if ok else 1
