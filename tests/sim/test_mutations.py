"""Mutation test: every single weakened dependency of a schedule is caught.

For each built op, fused and baseline, on a 2 x 2 cluster with edge tiles: remove any one wait, or
lower any one expected count by one. Each mutant must be refused by ``validate()`` (a race, an
unreachable count, a count of 0), or show a hazard, a deadlock or wrong data in the simulator. A
mutant that slips through is a wait the schedule does not need, or a bug the checks cannot see.
All mutants are tried where there are at most MAX_MUTANTS, else a seeded sample of that many.
"""
from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from mkernel import Cluster, Workload, reference
from mkernel.builders import get
from mkernel.errors import DeadlockError, ScheduleError
from mkernel.problems import KERNELS
from mkernel.reference import DATA_RTOL
from mkernel.sim import SimBackend

MAX_MUTANTS = 200
CLUSTER = Cluster("mut", 2, 2, transport="efa_srd")
SHAPES = {  # small, with edge tiles, several chunks
    "gemm_ar": dict(m=300, n=520, k=24, chunk_tiles=2, baseline_chunk_kib=8),
    "gemm_rs": dict(m=520, n=300, k=24, chunk_tiles=2, baseline_chunk_kib=8),
    "ag_gemm": dict(m=4 * 150, n=264, k=40, baseline_chunk_kib=4),
    "ring_attention": dict(m=40, n=3, k=32, tile_m=16, baseline_chunk_kib=2),
    "moe_dispatch_gemm": dict(m=192, n=40, k=32, experts=16, topk=3, tile_m=16, tile_n=32, routing="zipf"),
}


def mutants(schedule):
    """(description, mutated schedule) for every single-wait removal and count decrement."""
    for task in schedule.tasks:
        for i, wait in enumerate(task.waits):
            fewer = task.waits[:i] + task.waits[i + 1:]
            lower = task.waits[:i] + (dataclasses.replace(wait, count=wait.count - 1),) + task.waits[i + 1:]
            for how, waits in (("without", fewer), ("count-1 on", lower)):
                tasks = list(schedule.tasks)
                tasks[task.id] = dataclasses.replace(task, waits=waits)
                yield f"{task.describe()} {how} {wait.signal} >= {wait.count}", dataclasses.replace(
                    schedule, tasks=tuple(tasks))


def caught(schedule, inputs, expected: dict) -> bool:
    try:
        schedule.validate()
    except ScheduleError:
        return True
    try:
        stats = SimBackend().run(schedule, CLUSTER, inputs=inputs)
    except DeadlockError:
        return True
    if stats.hazards:
        return True
    return any(reference.relative_error(o, e) > DATA_RTOL
               for name, refs in expected.items() for o, e in zip(stats.outputs[name], refs))


CASES = [(k, v) for k in KERNELS for v in ("fused", "baseline")] + [
    (k, "ring baseline") for k in ("ag_gemm", "gemm_rs", "gemm_ar")] + [
    ("gemm_ar", "twoshot"), ("gemm_ar", "ring"), ("ag_gemm", "ring"), ("gemm_rs", "ring")] + [  # inter-node algorithms
    ("ring_attention", "causal"), ("moe_dispatch_gemm", "zipf_shifted")]  # node-symmetric forms (paired counters)
VARIANT_SHAPES = {"causal": dict(causal=1), "zipf_shifted": dict(routing="zipf_shifted")}  # fused, with these changes


@pytest.mark.parametrize("kernel,variant", CASES)
def test_every_weakened_dependency_is_caught(kernel, variant):
    module = get(kernel)
    algorithm = variant if variant in ("twoshot", "ring") else "direct"
    w = Workload(kernel=kernel, baseline="ring" if variant == "ring baseline" else "hierarchical",
                 internode=algorithm, **{**SHAPES[kernel], **VARIANT_SHAPES.get(variant, {})})
    fused = variant in ("fused", "twoshot", "ring", *VARIANT_SHAPES)
    schedule = (module.build if fused else module.build_baseline)(w, CLUSTER)
    schedule.validate()
    inputs = module.make_inputs(w, CLUSTER, np.random.default_rng(7))
    expected = reference.expected(w, inputs, CLUSTER.gpus_per_node)
    every = list(mutants(schedule))
    assert every, "a schedule with no waits cannot be mutated"
    sample = every if len(every) <= MAX_MUTANTS else random.Random(kernel + variant).sample(every, MAX_MUTANTS)
    escaped = [name for name, m in sample if not caught(m, inputs, expected)]
    assert not escaped, f"{len(escaped)} of {len(sample)} mutants escaped, e.g. {escaped[:3]}"
