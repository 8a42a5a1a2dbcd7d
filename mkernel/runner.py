"""The public entry point: build an op's fused and baseline schedules, validate, run, report.

``run(scenario)`` is what the CLI and the Python API call. It returns the result dict of
docs/result-schema.md (checked by :func:`mkernel.result.check_result`) and the fused run's
:class:`RunStats` (for traces).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from . import builders, reference
from .backend import RunStats, get_backend
from .errors import BackendUnavailable
from .ir import Role, Schedule
from .result import RESULT_VERSION
from .scenario import Scenario

# Data mode computes in float32 with sums over world * k terms; a correct schedule lands near
# 1e-7 relative error, a dropped or doubled contribution near 1e-1. The hw backend (bf16) sets its own.
DATA_RTOL = 1e-5
PROXY_KEYS = ("commands", "batches", "doorbells", "fences", "proxy_busy_us", "fence_wait_us", "ring_wait_us",
              "credit_wait_us")


def build(scenario: Scenario, folded: bool = False) -> tuple[Schedule, Schedule]:
    """The fused schedule and its unfused baseline, both validated; with ``folded``, only the nodes a
    collapsed run simulates (``Cluster.fold_nodes``) where the op is node-symmetric
    (:func:`mkernel.builders.node_symmetric`)."""
    module, w, c = builders.get(scenario.workload.kernel), scenario.workload, scenario.cluster
    span = c.fold_nodes
    kw = {"first_nodes": span} if folded and 0 < span < c.nodes and builders.node_symmetric(w, c) else {}
    fused = module.build(w, c, **kw)
    baseline = module.build_baseline(w, c, **kw)
    fused.validate(races=not folded)  # a collapsed run is a timing run: no data, no hazard or race checks
    baseline.validate(races=not folded)
    return fused, baseline


def run(scenario: Scenario, *, backend: str = "sim", data: bool = False, seed: int = 0,
        trace: bool = False, collapse: bool = False, faults=None, adaptive: bool = False) -> tuple[dict, RunStats]:
    """Run fused and baseline on one backend; with ``data``, check both against the oracle.

    ``collapse`` (sim only) simulates one node when every node does the same thing: exact times,
    far fewer events, but no hazard tracking; ignored with ``data`` or ``trace``. Node-symmetric
    ops are then built for the simulated nodes alone, so 64 nodes cost about what 2 do, and the
    static race check (whose cost grows faster than the schedule) is skipped. ``faults`` injects
    seeded faults: into both simulated runs (:class:`mkernel.sim.faults.Faults`), or into the hw
    fused run's host proxy (:class:`mkernel.hw.proxy.ProxyFaults`, 2 or more nodes). ``adaptive`` runs
    the fused op under the adaptive SM partition (:mod:`mkernel.controller`): the simulator's role
    pools, or the GPU kernel's shared target.
    """
    engine = get_backend(backend)
    if hasattr(engine, "cluster_for"):  # hw: schedules sized for the SMs each rank gets here
        scenario = dataclasses.replace(scenario, cluster=engine.cluster_for(scenario.cluster))
    w, c = scenario.workload, scenario.cluster
    data = data or backend == "hw"  # hw always checks its outputs against the oracle
    fused, baseline = build(scenario, folded=backend == "sim" and collapse and not (data or trace or faults))
    reason = engine.supports(fused, c)
    if reason:
        raise BackendUnavailable(f"backend {backend!r} cannot run {w.kernel}: {reason}")
    if faults is not None and backend != "sim" and c.nodes < 2:
        raise BackendUnavailable(f"backend {backend!r} injects faults in the host proxy, and a one-node run has "
                                 f"none (every peer is reached over NVLink): use 2 or more nodes")
    rtol = getattr(engine, "rtol", DATA_RTOL)
    inputs = expected = None
    if data:
        inputs = builders.get(w.kernel).make_inputs(w, c, np.random.default_rng(seed))
        expected = reference.expected(w, inputs, c.gpus_per_node)
    fold = {"collapse": collapse and not data and not trace, "faults": faults} if backend == "sim" else {
        "workload": w, "faults": faults}
    trajectory = None
    if adaptive:
        from .controller import Balance, Trajectory, sim_controller

        policy = Balance.for_cluster(c)
        trajectory = Trajectory() if backend == "sim" else None  # hw reads its own back (metrics["trajectory"])
        fold = {**fold, "controller": sim_controller(policy, trajectory) if trajectory is not None else policy}
    stats = engine.run(fused, c, inputs=inputs, seed=seed, trace=trace, **fold)
    if trace and trajectory is not None and stats.counters is not None:  # the target over time, as a track
        stats.counters.extend((rank, "intra target", points, "SMs") for rank, points in trajectory.points.items())
    fold.pop("controller", None)
    fused_err = _error(stats, expected)
    base = engine.run(baseline, c, inputs=inputs, seed=seed, **fold)
    base_err = _error(base, expected)
    timing = backend == "sim" and faults is None  # library calls are timed by their models (sim/library.py)
    base_s = _library_timed(engine, baseline, c, seed, fold, base) if timing and data else base.time_s
    paper = _paper_baseline(scenario, engine, seed, fold, base_s, baseline.variant) if timing else None
    flops = fused.flops_per_gpu
    launch = fused.launches[0]
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
        "time_s": stats.time_s,
        "tflops_per_gpu": flops / stats.time_s / 1e12,
        "baseline": {"name": baseline.variant, "time_s": base_s, "tflops_per_gpu": flops / base_s / 1e12,
                     "correct": _ok(base_err, rtol), "error": base_err, "bytes": base.bytes_total},
        "speedup": base_s / stats.time_s,
        "paper_baseline": None if paper is None else {**paper, "tflops_per_gpu": flops / paper["time_s"] / 1e12,
                                                      "speedup": paper["time_s"] / stats.time_s},
        "kernels": c.kernels,
        "collectives": w.collectives,
        "bytes": stats.bytes_total,
        "bytes_per_gpu": stats.bytes_per_gpu,
        "roles": {role.value: launch.budget(role) for role in Role},
        "correct": _correct(stats, base, fused_err, base_err, rtol),
        "error": fused_err,
        "hazards": list(stats.hazards),
        "breakdown": stats.metrics.get("breakdown_us"),
        "proxy": {k: stats.metrics[k] for k in PROXY_KEYS} if backend == "sim" and stats.metrics else None,
        "seed": seed,
        "wall_s": stats.wall_s + base.wall_s,
        "events": None if stats.events is None else stats.events + (base.events or 0),
        "note": (stats.metrics.get("note", "") if backend != "sim" else
                 "simulated times; model parameters in the scenario file")
        + ("; adaptive SM partition: roles are the static split it starts from" if adaptive else ""),
    }
    return result, stats


def _library_timed(engine, baseline: Schedule, c, seed: int, fold: dict, ran: RunStats) -> float:
    """A data run executes a baseline's library launches as tasks (their data is what it checks);
    its time is that of a timing run of the same schedule, where those launches last as long as
    the library calls they stand for (:mod:`mkernel.sim.library`)."""
    if not any(launch.library for launch in baseline.launches):
        return ran.time_s
    return engine.run(baseline, c, seed=seed, **fold).time_s


def _paper_baseline(scenario: Scenario, engine, seed: int, fold: dict, base_s: float, base_name: str) -> dict:
    """The paper's baseline beside ours: the op's own (build_paper_baseline, MoE's even all-to-all
    then one dense GEMM) timed in a timing run, or, where the paper's baseline is the same NCCL +
    cuBLAS / SDPA composition as ours, ours."""
    module, w, c = builders.get(scenario.workload.kernel), scenario.workload, scenario.cluster
    if not hasattr(module, "build_paper_baseline"):
        return {"name": base_name, "time_s": base_s}
    span = c.fold_nodes
    kw = {"first_nodes": span} if fold.get("collapse") and 0 < span < c.nodes and builders.node_symmetric(w, c) else {}
    paper = module.build_paper_baseline(w, c, **kw)
    paper.validate(races=False)
    ran = engine.run(paper, c, seed=seed, **fold)
    return {"name": paper.variant, "time_s": ran.time_s}


def _correct(fused: RunStats, base: RunStats, fused_err: float | None, base_err: float | None,
             rtol: float) -> bool | None:
    """False on any hazard or mismatch; True only if outputs were checked and match; else None."""
    if fused.hazards or base.hazards:
        return False
    if fused_err is None:
        return None
    return bool(_ok(fused_err, rtol) and _ok(base_err, rtol))


def _error(stats: RunStats, expected: dict | None) -> float | None:
    """The worst relative error over every output buffer and rank (inf for an unwritten element)."""
    if expected is None:
        return None
    worst = 0.0
    for name, refs in expected.items():
        for out, ref in zip(stats.outputs[name], refs):
            worst = max(worst, reference.relative_error(out, ref))
    return worst


def _ok(err: float | None, rtol: float = DATA_RTOL) -> bool | None:
    return None if err is None else err <= rtol
