"""The ``mkernel`` subcommands that build a scenario's schedules and run them, one case or a grid of
them: ``run``, ``show``, ``explore``, ``sweep`` and ``scaleout``, with :func:`scenario_from_args`, the
scenario a command line stands for. Like the rest of the command line (:mod:`mkernel.cli`), they
only parse, call the library, and print."""
from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from .backend import get_backend
from .cluster import HW_TRANSPORTS
from .errors import InputError
from .files import output_file, output_folder
from .problems import DEFAULT_SHAPES, KERNELS, NODE_REDUCE_KERNELS
from .result import check_result
from .scenario import Scenario, check, load_scenario


def scenario_from_args(args: argparse.Namespace) -> Scenario:
    """The scenario file with command-line overrides applied and re-checked."""
    sc = load_scenario(args.scenario)
    if args.tokens is not None and (args.kernel or sc.workload.kernel) != "moe_dispatch_gemm":
        raise InputError("--tokens applies to --kernel moe_dispatch_gemm (it sets m, the total tokens)")
    if args.tokens is not None:
        args.m = args.tokens
    if args.seq is not None and (args.kernel or sc.workload.kernel) != "ring_attention":
        raise InputError("--seq applies to --kernel ring_attention (it sets m, the sequence per GPU)")
    if args.seq is not None:
        args.m = args.seq
    if args.node_reduce is not None and (args.kernel or sc.workload.kernel) not in NODE_REDUCE_KERNELS:
        raise InputError(f"--node-reduce applies to --kernel {' or '.join(NODE_REDUCE_KERNELS)} (how their node owner "
                         "gets the node's partials)")
    sim_transport = args.transport
    if args.transport in HW_TRANSPORTS:  # the simulator models the NIC protocol; loopback and auto keep the scenario's
        from mkernel.hw.runtime.transports import SIM_MODEL

        sim_transport = SIM_MODEL.get(args.transport)
    cluster = {k: v for k, v in (("nodes", args.nodes), ("gpus_per_node", args.gpus_per_node),
                                 ("transport", sim_transport), ("notify", args.notify),
                                 ("kernels", getattr(args, "kernels", None))) if v is not None}
    for key, value in cluster.items():
        if isinstance(value, int) and value < 1:
            raise InputError(f"--{key.replace('_', '-')} must be >= 1, got {value}")
    workload = {k: v for k, v in (("kernel", args.kernel), ("m", args.m), ("n", args.n), ("k", args.k),
                                  ("causal", 1 if args.causal else None), ("internode", args.internode),
                                  ("schedule", args.schedule), ("node_reduce", args.node_reduce))
                if v is not None}
    if args.kernel and args.kernel != sc.workload.kernel:  # another op: its own default shape, then the flags
        workload = {**DEFAULT_SHAPES[args.kernel], **workload}
    if not cluster and not workload:
        return sc
    sc = dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, **cluster),
                             workload=dataclasses.replace(sc.workload, **workload))
    check(sc, "command line")
    return sc


def run(args: argparse.Namespace) -> int:
    from . import runner
    from .report import print_result

    output_file(args.json, "--json")
    output_file(args.trace, "--trace")
    sc = scenario_from_args(args)
    options = get_backend(args.backend).options(transport=args.transport, heap=args.heap, faults=args.faults)
    if args.splits:
        from .studies.splits import apply

        sc = apply(sc, args.splits)
    from .report import progress_bar

    with progress_bar() as progress:
        result, stats = runner.run(sc, backend=args.backend, data=args.data, seed=args.seed,
                                   trace=args.trace is not None, collapse=args.collapse, adaptive=args.adaptive,
                                   progress=progress, force=args.force, **options)
    problems = check_result(result)
    if problems:
        raise AssertionError("result does not match its schema: " + "; ".join(problems))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    if args.trace:
        from .trace import write_chrome_trace

        write_chrome_trace(stats.spans or [], stats.counters or [], args.trace)
    print_result(result)
    return 1 if result["correct"] is False else 0


def show(args: argparse.Namespace) -> int:
    """Both schedules, and which one a run executes (``Workload.schedule``; ``auto`` may pick the
    baseline, and the fused schedule is still what a user asks ``show`` about)."""
    from .report import print_schedule
    from .runner import build, chosen

    sc = scenario_from_args(args)
    fused, baseline = build(sc, force=args.force)
    runs = chosen(fused, baseline)
    if runs == "baseline":
        fused, baseline = build(dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, schedule="fused")),
                                force=args.force)
    print_schedule(fused)
    print_schedule(baseline)
    if sc.workload.kernel in NODE_REDUCE_KERNELS:
        print(f"the node owner's reduction: {sc.workload.node_reduce} (node_reduce)")
    print(f"a run executes the {runs} schedule (schedule = {sc.workload.schedule})")
    return 0


def explore(args: argparse.Namespace) -> int:
    from .runner import build
    from .sim.explore import explore

    sc = scenario_from_args(args)
    status, explored = 0, 0
    for schedule in build(sc, force=args.force):
        try:
            found = explore(schedule, sc.cluster)
        except InputError as exc:
            print(f"{schedule.kernel}/{schedule.variant}: not explored: {exc}")
            continue
        explored += 1
        verdict = "every delivery order is safe" if found.ok else f"BROKEN: {found.failure}"
        print(f"{schedule.kernel}/{schedule.variant} on {sc.cluster.nodes}x{sc.cluster.gpus_per_node} "
              f"{sc.cluster.transport} (notify {sc.cluster.notify_mode}): {found.states} states; {verdict}")
        for step, delivery in enumerate(found.counterexample, 1):
            print(f"  {step}. {delivery}")
        status = status or (0 if found.ok else 1)
    if not explored:
        raise InputError("no schedule of this case is small enough for exhaustive mode")
    return status


def sweep(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .studies import study, sweep

    output_folder(args.out, "--out")
    if args.workers < 1:
        raise InputError(f"--workers {args.workers}: at least 1")
    options = sweep.parse_options(args.set)
    if args.grid == "scaling":
        if args.testbeds:
            raise InputError("--scenarios picks the reference grid's clusters; the scaling grid has its own "
                             "(mkernel/studies/study.py): drop one of them")
        points = study.grid(kernels=args.kernels or KERNELS)
    else:
        testbeds = sweep.expand_scenarios(args.testbeds) if args.testbeds else sweep.TESTBEDS
        points = sweep.reference_grid(testbeds=testbeds, kernels=args.kernels or KERNELS)
    if args.sizes is not None:
        keep = {}
        for p in points:
            keep.setdefault((p.testbed, p.kernel, p.options), []).append(p)
        points = [p for group in keep.values() for p in group[:args.sizes]]
    points = [dataclasses.replace(p, options=p.options + extra) for p in points for extra in options]
    if args.comm_sms:
        return split_sweep(args, points)
    if args.backend != "sim":
        raise InputError(f"--backend {args.backend}: the grid sweep runs on the simulator; --comm-sms sweeps "
                         f"static splits on either backend")
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    failed = []
    status = SweepStatus(len(points), args.out)

    def advance(point, row) -> None:
        if "error" in row:
            failed.append(row)
        status.done += 1
        bar.update(task, advance=1, description=point.key[:60])

    with Progress(*columns) as bar:
        task = bar.add_task("sweep", total=len(points))
        rows = sweep.run_grid(points, args.out, workers=args.workers, progress=advance)
    print(f"{len(rows)} points in {sweep.write_table(rows, args.out)}")
    if args.grid == "scaling":
        (args.out / "summary.md").write_text(study.summary(rows))
        print(f"tables: {args.out / 'summary.md'}")
        for figure in study.plots(rows, args.out):
            print(f"plot: {figure}")
    else:
        figure = sweep.plot(rows, args.out)
        print(f"plot: {figure}" if figure else "plot skipped: matplotlib is not installed (pip install 'mkernel[sim]')")
    for row in failed:
        print(f"FAILED {row['key']}: {row['error']}")
    return 1 if failed else 0


class SweepStatus:
    """How far a sweep got, for its deadline message (:func:`mkernel.limits.bounded`)."""

    def __init__(self, total: int, out: Path) -> None:
        self.total, self.done, self.out = total, 0, out

    def deadline_status(self) -> str:
        return (f"{self.done} of {self.total} points finished this time, kept in {self.out / 'results.jsonl'}: "
                f"the same command resumes from there")


def split_sweep(args: argparse.Namespace, points) -> int:
    from .studies import splits, sweep

    try:
        values = [int(v) for v in args.comm_sms.split(",")]
    except ValueError:
        raise InputError(f"--comm-sms {args.comm_sms!r}: a comma-separated list of integers") from None
    scenarios = [(p, sweep.scenario_of(p)) for p in points]  # every point checked before the first run
    for _, sc in scenarios:
        splits.check_values(sc, values)
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "splits.jsonl"
    done = splits.read_log(log)
    if (args.out / "splits.json").exists():
        splits.read_table(args.out / "splits.json", "--out")  # merged into at the end: checked now
    rows = []
    for p, sc in scenarios:
        name = f"{args.backend}:{p.key}"  # a sim time never stands for a measured one
        have = {n: t for (key, n), t in done.items() if key == name}
        r = splits.curve(sc, values, backend=args.backend, done=have,
                         record=lambda n, t, name=name, sc=sc: splits.log_run(log, name, sc, n, t))
        rows.append(r)
        print(f"{p.key}: best {r['best']} intra SMs; " + "  ".join(f"{n}:{v:.3f}" for n, v in r["normalised"].items()))
    print(f"table: {splits.write(rows, args.out / 'splits.json')}")
    return 0


def scaleout(args: argparse.Namespace) -> int:
    from .studies import scaleout

    if args.list:
        print("\n".join(f"scaleout/{name}" for name in scaleout.scenarios()))
        return 0
    output_folder(args.out, "--out")
    paths = scaleout.write(args.out)
    print(f"{len(paths)} scenarios in {args.out}")
    return 0
