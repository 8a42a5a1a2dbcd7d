"""The small workload of every op, one table for every test: odd shapes (nothing divides its tile),
so edge tiles, ragged chunks and partial vectors are exercised wherever a test runs an op.

Tests take it through the ``small_workload`` fixture (tests/conftest.py) or :func:`small_workload`,
changing only what they need (more chunks, a causal mask, a routing); the fused GPU tests and their
tools name cases (:data:`CASES`: every op, and the causal ring attention).
"""
from __future__ import annotations

import numpy as np

from mkernel import Workload, builders, reference
from mkernel.cluster import Cluster
from mkernel.hw.lowering import interp

SHAPES = {
    "gemm_ar": dict(m=300, n=520, k=72),
    "gemm_rs": dict(m=640, n=520, k=72),
    "ag_gemm": dict(m=400, n=264, k=40),
    "ring_attention": dict(m=200, n=2, k=64),
    "moe_dispatch_gemm": dict(m=256, n=264, k=136, experts=8, topk=2),
}
CASES = {**{kernel: {} for kernel in SHAPES}, "ring_attention_causal": {"causal": 1}}  # case -> its changes


def small_workload(kernel: str, **changes) -> Workload:
    """``kernel``'s small workload, with ``changes`` (any :class:`~mkernel.problems.Workload` field)."""
    return Workload(kernel=kernel, **{**SHAPES[kernel], **changes})


def workload(case: str) -> Workload:
    """The workload of a :data:`CASES` name (``_causal`` names the causal variant of its op)."""
    kernel = case.removesuffix("_causal")
    return small_workload(kernel, **CASES[case])


def run_case(case: str, nodes: int, gpn: int, calls: int = 3, shaping=None, controller=None, faults=None,
             wait_s: float = 5.0, transport: str = "loopback", heap: str = "device", net=None,
             data_path: str = "auto", rank_fn=None, barrier_s: float = 30.0, **changes) -> list[dict]:
    """:func:`harness.rank.run_rank` of ``case`` (with ``changes``, any Workload field) on ``nodes`` x
    ``gpn`` emulated ranks, their nodes joined by ``transport`` (the Context's, with its ``heap`` and
    ``net`` options; ``data_path``: HwKnobs'): each rank's worst error per output, unwritten elements and epoch after
    ``calls`` checked calls. ``wait_s`` bounds every device wait but the call barrier's, ``barrier_s``.
    ``rank_fn``: run_rank's stand-in, taking its arguments (experiments)."""
    import dataclasses

    from mkernel.hw.runtime.emulate import launch

    from .rank import run_rank

    w = dataclasses.replace(workload(case), **changes)
    return launch(rank_fn or run_rank, nodes * gpn, args=(w, nodes, gpn, 7, calls, 0, wait_s, transport, shaping,
                                               controller, faults, heap, net, data_path, barrier_s), timeout_s=600)


def assert_exact(results: list[dict], calls: int) -> None:
    """The fused tests' verdict on :func:`run_case`'s results: every output of every rank within
    :data:`harness.rank.TOLERANCE` of the float64 oracle, no element unwritten, one epoch per call."""
    from .rank import TOLERANCE

    for r in results:
        assert all(e <= TOLERANCE for e in r["errors"].values()), r
        assert not any(r["unwritten"].values()), r
        assert r["epoch"] == calls, r


def interp_errors(w: Workload, c: Cluster, seed: int, calls: int = 3, unordered: bool = False, m=None,
                  fence: bool = True, first: int = 1) -> list[float]:
    """The hw plan interpreter (hw/lowering/interp.py) run call after call with fresh inputs and the heap
    kept: each call's relative error against the float64 oracle (worst over outputs and ranks), epochs
    from ``first``; NaN (an element not written) is inf. ``m``: a machine already built."""
    mod = builders.get(w.kernel)
    m = m or interp.machine(mod.build(w, c))
    rng = np.random.default_rng(seed)
    errors = []
    for epoch in range(first, first + calls):
        inputs = mod.make_inputs(w, c, rng)
        out = interp.call(m, inputs, epoch, rng, unordered=unordered, fence=fence)
        ref = reference.expected(w, inputs, c.gpus_per_node)
        errors.append(max(np.inf if np.isnan(out[k][r]).any() else reference.relative_error(out[k][r], ref[k][r])
                          for k in ref for r in range(c.world)))
    return errors
