"""The public entry point: build an op's fused and baseline schedules, validate, run, report.

``run(scenario)`` is what the CLI and the Python API call. It returns the result dict of
docs/result-schema.md (checked by :func:`mkernel.result.check_result`) and the fused run's
:class:`RunStats` (for traces).
"""
from __future__ import annotations

import dataclasses

from . import builders, limits, run_data
from .backend import RunStats, get_backend
from .builders import _auto as auto
from .builders import _rail as rail
from .errors import BackendUnavailable, MkernelError
from .ir import Role, Schedule
from .result import RESULT_VERSION
from .scenario import Scenario

PROXY_KEYS = ("commands", "batches", "doorbells", "fences", "proxy_busy_us", "fence_wait_us", "ring_wait_us",
              "credit_wait_us")


def build(scenario: Scenario, folded: bool = False, grouped: bool = False,
          force: bool = False, timing: bool = False, seed: int = 0, local: bool = False) -> tuple[Schedule, Schedule]:
    """The fused schedule and its unfused baseline, both validated; with ``folded``, only the nodes a
    collapsed run simulates (``Cluster.fold_nodes``) where the op is node-symmetric
    (:func:`mkernel.builders.node_symmetric`), and with ``local`` too, the fused one (and a timing
    build's baseline) for those nodes' local rank 0 alone where every local rank runs its queues rotated
    (:func:`mkernel.builders.local_symmetric`: a run that folds local ranks, :mod:`mkernel.sim.localfold`,
    needs no more); with ``grouped``, with grouped tasks (the simulator's);
    with ``timing``, for a simulated timing run (no data): the baseline's library launches without
    their tasks, which such a run never runs (:class:`~mkernel.schedule_builder.ScheduleBuilder`).
    A problem whose estimated schedules pass the memory limit is refused before anything is built,
    unless ``force`` (:mod:`mkernel.limits`). The first schedule is the one the run executes:
    the fused one, or the baseline where ``Workload.schedule`` (``auto``:
    :func:`mkernel.builders._auto.choose`, by simulating both where the simulator is installed, with
    ``seed``) says so; :func:`chosen` tells which."""
    built = _build(scenario, folded, grouped, force, timing, seed, local=local)
    return built.fused, built.baseline


@dataclasses.dataclass(frozen=True, slots=True)
class _Built:
    """What :func:`_build` hands a run: the pair :func:`build` returns, the simulated runs ``auto``
    decided by (by variant; empty where none ran), the scenario with ``auto``'s inter-node algorithm
    named, and the two schedules' region tables as their ``validate()`` returned them."""

    fused: Schedule
    baseline: Schedule
    decided: dict[str, RunStats]
    scenario: Scenario
    regions: tuple


class _Simulated:
    """A schedule's simulated time (us) for ``auto``'s choice, each schedule simulated once, as a
    sim run times it (no data; collapsed where exact if ``collapse``); ``runs`` keeps the stats by
    variant, so a sim run that is this same timing run takes them instead of simulating again."""

    def __init__(self, engine, c, seed: int, collapse: bool, progress, hazards: bool | None = None) -> None:
        self.engine, self.c, self.seed, self.collapse, self.progress = engine, c, seed, collapse, progress
        self.hazards = hazards
        self.done: list[tuple[Schedule, RunStats]] = []  # each schedule simulated, kept alive (ids stay unique)

    def __call__(self, s: Schedule) -> float:
        stats = next((r for t, r in self.done if t is s), None)
        if stats is None:
            limits.step(f"simulating the {s.variant} schedule ({len(s.tasks):,} tasks) for auto's choice")
            stats = self.engine.run(s, self.c, seed=self.seed, collapse=self.collapse, progress=self.progress,
                                    hazards=self.hazards)
            self.done.append((s, stats))
        return stats.time_s * 1e6

    def runs(self, *kept: Schedule) -> dict[str, RunStats]:
        """The stats of the schedules kept, by variant (the fused candidates not kept are dropped)."""
        return {t.variant: r for t, r in self.done if any(t is k for k in kept)}


def _simulator(w, c, seed: int, collapse: bool, progress, hazards: bool | None) -> _Simulated | None:
    """What ``auto`` decides by: the simulator where it is installed (None elsewhere, or where no
    choice is asked for)."""
    if w.schedule != "auto" or c.world == 1:
        return None
    try:
        return _Simulated(get_backend("sim"), c, seed, collapse, progress, hazards)
    except BackendUnavailable:
        return None


def _build(scenario: Scenario, folded: bool, grouped: bool, force: bool, timing: bool, seed: int,
           collapse: bool = True, progress=None, local: bool = False,
           hazards: bool | None = None) -> _Built:
    """:func:`build`, with what a run needs beside it (:class:`_Built`): ``auto``'s simulated runs are
    run as a sim run with ``collapse``, ``progress`` and ``hazards`` would run them, its inter-node
    algorithm chosen by :func:`mkernel.builders._auto.choose_internode`, and the region tables are a
    backend's ``regions``."""
    module, w, c = builders.get(scenario.workload.kernel), scenario.workload, scenario.cluster
    span = c.fold_nodes
    foldable = span if 0 < span < c.nodes and builders.node_symmetric(w, c) else 0
    kw = {"first_nodes": foldable} if folded and foldable else {}
    one = bool(kw) and local and builders.local_symmetric(w, c)
    est = limits.check_tasks(w, c, kw.get("first_nodes", 0), force, foldable, one)
    kw["grouped"] = grouped
    tables: list[tuple[Schedule, tuple | None]] = []  # each schedule validated, with the table it read

    def build_fused(wk) -> Schedule | None:  # built as the workload's own is (None: it cannot be folded alike)
        if kw.get("first_nodes") and not builders.node_symmetric(wk, c):
            return None
        s = module.build(wk, c, **kw, **({"local_fold": True} if kw.get("first_nodes") and local
                                           and builders.local_symmetric(wk, c) else {}))
        tables.append((s, s.validate(races=not folded)))
        return s

    limits.step(f"building the fused and baseline schedules (about {est.tasks:,} tasks)")
    fused = module.build(w, c, **kw, **({"local_fold": True} if one else {}))
    local_base = {"local_fold": True} if one and builders.local_baseline(w, c) else {}
    baseline = module.build_baseline(w, c, **kw, **({"library_tasks": False, **local_base} if timing else {}))
    limits.step(f"checking the schedules ({len(fused.tasks) + len(baseline.tasks):,} tasks)")
    for s in (fused, baseline):  # a collapsed run is a timing run: no data, no hazard or race checks
        tables.append((s, s.validate(races=not folded)))
    simulated = _simulator(w, c, seed, collapse, progress, hazards)
    if simulated is not None:
        w, fused = auto.choose_internode(w, c, fused, build_fused, simulated)
        scenario = dataclasses.replace(scenario, workload=w)
    if auto.choose(w, c, fused, baseline, simulated) == "baseline":
        fused = baseline
    regions = tuple(next(t for x, t in tables if x is s) for s in (fused, baseline))
    return _Built(fused, baseline, {} if simulated is None else simulated.runs(fused, baseline), scenario, regions)


def chosen(fused: Schedule, baseline: Schedule) -> str:
    """Which schedule a pair from :func:`build` runs: ``fused``, or ``baseline`` (the op's unfused one)."""
    return "baseline" if fused is baseline else "fused"


def collapses(scenario: Scenario, *, data: bool = False, trace: bool = False, faults=None) -> bool:
    """Whether a sim run collapses by default: the op is node-symmetric on this cluster, and nothing
    asks for every node: no data, no trace, no faults, and no protocol whose flags may overtake
    their data (``flag`` notification on ``efa_srd``: the hazard tracker's case)."""
    w, c = scenario.workload, scenario.cluster
    racy = c.notify_mode == "flag" and c.transport == "efa_srd"
    return (not (data or trace or faults or racy) and 0 < c.fold_nodes < c.nodes
            and builders.node_symmetric(w, c))


def run(scenario: Scenario, *, backend: str = "sim", data: bool = False, seed: int = 0,
        trace: bool = False, collapse: bool | None = None, faults=None, adaptive: bool = False,
        progress=None, force: bool = False, transport: str = "loopback", heap: str = "device",
        hazards: bool | None = None) -> tuple[dict, RunStats]:
    """Run fused and baseline on one backend; with ``data``, check both against the oracle.

    ``collapse`` (sim only) simulates one node when every node does the same thing: exact times,
    far fewer events, but no hazard tracking; ignored with ``data`` or ``trace``. Node-symmetric
    ops are then built for the simulated nodes alone, so 64 nodes cost about what 2 do, and the
    static race check (whose cost grows faster than the schedule) is skipped. None (the default)
    collapses where :func:`collapses` says nothing asks for every node; the result says which
    (``collapsed``). ``progress(stage, done, total)`` hears how far a sim run is (stages: build,
    then each simulated variant). ``faults`` injects
    seeded faults: into both simulated runs (:class:`mkernel.sim.faults.Faults`), or into the hw
    fused run's host proxy (:class:`mkernel.hw.runtime.proxy.ProxyFaults`, 2 or more nodes). ``adaptive`` runs
    the fused op under the adaptive SM partition (:mod:`mkernel.controller`): the simulator's role
    pools, or the GPU kernel's shared target. A run whose schedules or arrays would pass the memory
    limit is refused before they are built or allocated, unless ``force`` (:mod:`mkernel.limits`).
    ``transport`` and ``heap`` (hw only): how the fused run's ranks reach other nodes and where their
    symmetric buffer lives (:class:`mkernel.hw.runtime.context.Context`). ``hazards`` (sim only):
    False skips the hazard tracking of runs that are not collapsed (their ``hazards`` stay empty),
    for timing studies that do not read them; None tracks wherever every node runs.
    """
    engine = get_backend(backend)
    caps = engine.caps
    asked = scenario
    scenario = dataclasses.replace(scenario, cluster=engine.cluster_for(scenario.cluster))
    w, c = scenario.workload, scenario.cluster
    data = data or caps.always_data
    if collapse is None:
        collapse = caps.collapses and collapses(scenario, data=data, trace=trace, faults=faults)
    if progress is not None:
        progress("build", 0, 0)
    quiet = caps.collapses and collapse and not (data or trace or faults)  # a collapsed timing run
    built = _build(
        scenario, quiet, caps.grouped, force, caps.models_library and not data, seed, collapse or not caps.collapses,
        progress if caps.predicts else None, local=quiet and not adaptive and engine.folds_locals(c), hazards=hazards)
    fused, baseline, scenario, regions = built.fused, built.baseline, built.scenario, built.regions
    w = scenario.workload  # auto's inter-node algorithm named
    # auto's simulated runs are this run's where it is the same timing run: take them, simulate nothing twice
    same = caps.predicts and not (data or trace or faults or adaptive)
    reuse = built.decided if same else {}
    reason = engine.supports(fused, c)
    if reason:
        raise BackendUnavailable(f"backend {backend!r} cannot run {w.kernel}: {reason}")
    if faults is not None and caps.faults_in_proxy and c.nodes < 2:
        raise BackendUnavailable(f"backend {backend!r} injects faults in the host proxy, and a one-node run has "
                                 f"none (every peer is reached over NVLink): use 2 or more nodes")
    rtol = engine.rtol
    fused_case = base_case = (None, None, None)  # (inputs, oracle, sample plan) of each run
    if data:
        fused_case, base_case = run_data.cases(caps.samples, w, c, (fused, baseline), seed, force)
    inputs, expected, plan = fused_case
    fold = {"collapse": collapse and not data and not trace, "faults": faults, "progress": progress,
            "hazards": hazards, "workload": w, "transport": transport, "heap": heap}
    trajectory = None
    if adaptive:
        from .controller import Balance, Trajectory, sim_controller

        policy = Balance.for_cluster(c)
        trajectory = None if caps.own_trajectory else Trajectory()  # hw reads its own back (metrics["trajectory"])
        fold = {**fold, "controller": sim_controller(policy, trajectory) if trajectory is not None else policy}
    where = caps.where
    limits.step(f"running the fused op {where} ({len(fused.tasks):,} tasks on {c.world} ranks)")
    stats = reuse.get(fused.variant) or engine.run(fused, c, inputs=inputs, seed=seed, trace=trace, **fold,
                                                   regions=regions[0], **run_data.sample_option(plan))
    if trace and trajectory is not None and stats.counters is not None:  # the target over time, as a track
        stats.counters.extend((rank, "intra target", points, "SMs") for rank, points in trajectory.points.items())
    fold.pop("controller", None)
    fused_err = run_data.error(stats, expected)
    inputs, expected, base_plan = base_case
    limits.step(f"running the baseline {baseline.variant} {where} ({len(baseline.tasks):,} tasks)")
    # the baseline chosen (auto): the run above was the baseline's; the same seed would give the same time
    base = stats if fused is baseline else reuse.get(baseline.variant) or engine.run(
        baseline, c, inputs=inputs, seed=seed, **fold, regions=regions[1], **run_data.sample_option(base_plan))
    base_err = run_data.error(base, expected)
    timing = caps.models_library and faults is None  # library calls are timed by their models (sim/library.py)
    base_s = _library_timed(engine, baseline, c, seed, fold, base) if timing and data else base.time_s
    paper = _paper_baseline(scenario, engine, seed, fold, base_s, baseline.variant, caps.grouped) if timing else None
    flops = fused.flops_per_gpu
    fused_s = base_s if fused is baseline else stats.time_s  # a data run times library calls by their models
    launch = fused.launches[0]
    source, base_source = _sources(caps.predicts, stats, c)
    comparable = source == base_source and source in ("measured", "predicted")
    result = {
        "version": RESULT_VERSION,
        "kernel": w.kernel,
        "variant": fused.variant,
        "backend": backend,
        "scenario": scenario.name,
        "shape": {"m": w.m, "n": w.n, "k": w.k, "tile_m": w.tile_m, "tile_n": w.tile_n,
                  "chunk_tiles": w.chunk_tiles},
        "dtype": w.dtype,
        "cluster": {"nodes": c.nodes, "gpus_per_node": c.gpus_per_node, "transport": c.transport},
        "time_s": fused_s,
        "time_source": source,
        "tflops_per_gpu": flops / fused_s / 1e12,
        "baseline": {"name": baseline.variant, "time_s": base_s, "time_source": base_source,
                     "tflops_per_gpu": flops / base_s / 1e12, "correct": run_data.ok(base_err, rtol), "error": base_err,
                     "bytes": base.bytes_total},
        "speedup": base_s / fused_s if comparable else None,
        "predicted": None if caps.predicts else _predicted(asked, seed, force),
        "paper_baseline": None if paper is None else {**paper, "tflops_per_gpu": flops / paper["time_s"] / 1e12,
                                                      "speedup": paper["time_s"] / fused_s},
        "kernels": c.kernels,
        "collectives": w.collectives,
        "internode": rail.choose(w, c) if w.kernel in rail.ALGORITHMS and fused is not baseline else None,
        "schedule": chosen(fused, baseline),
        "bytes": stats.bytes_total,
        "bytes_per_gpu": stats.bytes_per_gpu,
        "roles": {role.value: launch.budget(role) for role in Role},
        "correct": run_data.correct(stats, base, fused_err, base_err, rtol),
        "error": fused_err,
        "hazards": list(stats.hazards),
        "breakdown": stats.metrics.get("breakdown_us"),
        "proxy": {k: stats.metrics[k] for k in PROXY_KEYS} if caps.proxy_metrics and stats.metrics else None,
        "seed": seed,
        "wall_s": stats.wall_s + (base.wall_s if base is not stats else 0.0),
        "events": None if stats.events is None else stats.events + ((base.events or 0) if base is not stats else 0),
        "collapsed": (stats.metrics or {}).get("collapsed") if caps.collapses else None,
        "sim_core": (stats.metrics or {}).get("sim_core"),
    }
    result["note"] = _note(result, stats, adaptive, plan, caps.predicts)
    return result, stats


def _sources(predicts: bool, stats: RunStats, c) -> tuple[str, str]:
    """Where the fused and the baseline time come from. The simulator predicts both. On hw the fused
    time is measured only on one real node with a GPU per rank (ranks sharing a GPU, or nodes
    emulated over the loopback, are an emulation); the baseline's collectives always run through
    gloo on the host (the launcher's process group), so its time is an emulation too."""
    if predicts:
        return "predicted", "predicted"
    return ("emulated" if stats.metrics.get("emulated") or c.nodes > 1 else "measured"), "emulated"


def _predicted(scenario: Scenario, seed: int, force: bool) -> dict | None:
    """The simulator's fused and baseline times for the scenario asked (its own GPUs and nodes), so
    that a hw run on an emulated cluster still shows a speedup, labelled as predicted."""
    limits.step("predicting the same scenario in the simulator")
    try:
        sim, _ = run(scenario, backend="sim", seed=seed, collapse=True, force=force)
    except MkernelError:  # no simulator installed, or a shape it refuses: no prediction
        return None
    return {"time_s": sim["time_s"], "baseline_time_s": sim["baseline"]["time_s"], "speedup": sim["speedup"]}


def _note(result: dict, stats: RunStats, adaptive: bool, plan, predicts: bool) -> str:
    parts = ["predicted times: the simulator with the scenario's model parameters" if predicts else
             stats.metrics.get("note", "")]
    if not predicts:
        parts.append("the baseline's collectives ran through gloo on the host, so its time is no baseline and no "
                     "speedup is measured" + ("; predicted: the simulator's figures for this scenario"
                                              if result["predicted"] else "") + " (mkernel bench measures against NCCL)")
    if adaptive:
        parts.append("adaptive SM partition: roles are the static split it starts from")
    if result["schedule"] == "baseline":
        parts.append("schedule: the baseline (auto finds no fused schedule faster here: simulated where the "
                     "simulator is installed, else by the cost model's estimate with its held-out margin: "
                     "Workload.schedule = auto, mkernel/builders/_auto.py), so the speedup is 1")
    if plan is not None and plan.fraction() < 1:
        parts.append(f"data checked on {plan.fraction():.2%} of the output elements (every region's first and last "
                     f"rows and columns, and a seeded sample)")
    faults = stats.metrics.get("faults")
    if faults:
        parts.append("injected faults: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in faults.items() if v)
                     + (" (each dropped transmission resent after the ack timer)" if faults.get("dropped") else ""))
    return "; ".join(p for p in parts if p)


def _library_timed(engine, baseline: Schedule, c, seed: int, fold: dict, ran: RunStats) -> float:
    """A data run executes a baseline's library launches as tasks (their data is what it checks);
    its time is that of a timing run of the same schedule, where those launches last as long as
    the library calls they stand for (:mod:`mkernel.sim.library`)."""
    if not any(launch.library for launch in baseline.launches):
        return ran.time_s
    return engine.run(baseline, c, seed=seed, **fold).time_s


def _paper_baseline(scenario: Scenario, engine, seed: int, fold: dict, base_s: float, base_name: str,
                    grouped: bool) -> dict:
    """The paper's baseline beside ours: the op's own (build_paper_baseline, MoE's even all-to-all
    then one dense GEMM) timed in a timing run, or, where the paper's baseline is the same NCCL +
    cuBLAS / SDPA composition as ours, ours."""
    module, w, c = builders.get(scenario.workload.kernel), scenario.workload, scenario.cluster
    if not hasattr(module, "build_paper_baseline"):
        return {"name": base_name, "time_s": base_s}
    span = c.fold_nodes
    kw = {"first_nodes": span} if fold.get("collapse") and 0 < span < c.nodes and builders.node_symmetric(w, c) else {}
    paper = module.build_paper_baseline(w, c, grouped=grouped, library_tasks=False, **kw)  # only ever timed
    paper.validate(races=False)
    ran = engine.run(paper, c, seed=seed, **fold)
    return {"name": paper.variant, "time_s": ran.time_s}
