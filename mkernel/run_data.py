"""The data side of a run (:func:`mkernel.runner.run` with ``data``): the inputs and float64 oracle
each run checks against, drawn whole or on a sampled plan after the memory check, and the verdict
on what came back. Apart from the runner so that its timing path reads without them."""
from __future__ import annotations

import numpy as np

from . import builders, limits, reference
from .backend import RunStats
from .ir import BufferKind, Schedule
from .reference import DATA_RTOL


def cases(samples: bool, w, c, schedules: tuple[Schedule, Schedule], seed: int, force: bool):
    """(inputs, oracle, plan) for the fused and the baseline run, after the memory check. A backend
    that ``samples`` (the sim) computes every element where the whole arrays are small (limits.WHOLE_DATA_BYTES), else the
    sampled rows and columns of :mod:`mkernel.sampling`; hw draws every rank's whole inputs (the
    GPUs compute every element) and one oracle serves both runs."""
    what = f"{w.kernel} {w.m}x{w.n}x{w.k} on {c.nodes}x{c.gpus_per_node} GPUs"
    limits.step("drawing the inputs and the float64 oracle")
    if not samples:
        limits.check_data(f"the inputs, oracle and outputs of {what}", data_bytes(*schedules), force, hint(w))
        inputs = builders.get(w.kernel).make_inputs(w, c, np.random.default_rng(seed))
        case = (inputs, reference.expected(w, inputs, c.gpus_per_node), None)
        return case, case
    from . import sampled_oracle, sampling

    whole = data_bytes(*schedules) <= limits.WHOLE_DATA_BYTES
    plans = [sampling.Plan.whole(s) if whole else sampling.plan(s, seed) for s in schedules]
    limits.check_data(f"data mode of {what}", sum(plan_bytes(p) for p in plans), force, hint(w))
    draw = sampled_oracle.Inputs(w, c, schedules[0], seed)
    return tuple((draw.for_plan(p), sampled_oracle.expected(w, c, draw, p), p) for p in plans)


def sample_option(plan) -> dict:
    """A backend run's ``sample`` keyword: none for a whole-array run."""
    return {} if plan is None else {"sample": plan}


def plan_bytes(plan) -> int:
    """A data run's float32 arrays and float64 oracle outputs under ``plan``."""
    return 4 * plan.elements() + 8 * plan.elements((BufferKind.OUTPUT,))


def data_bytes(fused: Schedule, baseline: Schedule) -> int:
    """Host memory of a data run on whole arrays at most: every rank's float32 inputs, the float64
    oracle of its outputs, and each schedule's float32 arrays (every buffer of every rank)."""
    def elems(s: Schedule, kinds=tuple(BufferKind)) -> int:
        return sum(b.rows * b.cols for b in s.buffers if b.kind in kinds) * s.world

    return 4 * elems(fused, (BufferKind.INPUT,)) + 8 * elems(fused, (BufferKind.OUTPUT,)) + 4 * (
        elems(fused) + elems(baseline))


def hint(w) -> str:
    """What to shrink when a data run of ``w`` is refused for its memory."""
    if w.kernel == "ring_attention":
        return (f"fewer heads (--n {w.n}) or a shorter sequence (--seq {w.m}): attention needs every key, "
                f"so every rank holds every rank's K whole")
    if w.kernel == "moe_dispatch_gemm":
        return (f"smaller hidden and expert sizes (--k {w.k}, --n {w.n}: the {w.experts} experts' weights "
                f"alone are {w.experts * w.k * w.n * 4 / 1e9:.1f} GB in float32) or fewer experts (workload.experts)")
    return ""


def correct(fused: RunStats, base: RunStats, fused_err: float | None, base_err: float | None,
             rtol: float) -> bool | None:
    """False on any hazard or mismatch; True only if outputs were checked and match; else None."""
    if fused.hazards or base.hazards:
        return False
    if fused_err is None:
        return None
    return bool(ok(fused_err, rtol) and ok(base_err, rtol))


def error(stats: RunStats, expected: dict | None) -> float | None:
    """The worst relative error over every output buffer and rank (inf for an unwritten element)."""
    if expected is None:
        return None
    worst = 0.0
    for name, refs in expected.items():
        for out, ref in zip(stats.outputs[name], refs):
            worst = max(worst, reference.relative_error(out, ref))
    return worst


def ok(err: float | None, rtol: float = DATA_RTOL) -> bool | None:
    """Whether an error passes (None: nothing was checked)."""
    return None if err is None else err <= rtol
