"""Shared fixtures: the small workload of every op, small clusters and a tiny hand-built schedule that
tests mutate."""
from __future__ import annotations

import pytest
from harness import cases

from mkernel import BufferKind, Cluster, Op, Region, Role, ScheduleBuilder, Signal, Wait


def tiny_schedule(rows: int = 4, cols: int = 4):
    """Two ranks in one node: each copies its input to its output, then a NOP waits for that copy."""
    sb = ScheduleBuilder("tiny", "fused", world=2, gpus_per_node=2, num_sms=4)
    sb.buffer("X", rows, cols, kind=BufferKind.INPUT)
    sb.buffer("OUT", rows, cols, kind=BufferKind.OUTPUT)
    sb.launch("k", {Role.COMPUTE: 2, Role.INTRA: 1})
    for r in range(2):
        sb.add(r, Role.COMPUTE, Op.COPY, reads=(Region("X", r, 0, rows, 0, cols),),
               writes=(Region("OUT", r, 0, rows, 0, cols),), signals=(Signal(r, "done"),), label="copy")
        sb.add(r, Role.INTRA, Op.NOP, waits=(Wait(Signal(r, "done"), 1),), label="drain")
    return sb.build(0.0)


@pytest.fixture
def small_workload():
    """:func:`harness.cases.small_workload`: ``small_workload(kernel, **changes)``, the op's odd shape."""
    return cases.small_workload


@pytest.fixture
def tiny():
    return tiny_schedule()


@pytest.fixture
def cluster_2x2():
    return Cluster("2x2", nodes=2, gpus_per_node=2)


def pytest_configure(config):
    """The test session is a process entry: the no-multicast environment before any test starts CUDA."""
    from mkernel.hw.runtime.safety import apply_no_multicast

    apply_no_multicast()


def pytest_collection_modifyitems(config, items):
    from mkernel.sim import native

    if native.state.startswith("compiled"):  # (its classes cannot be patched or subclassed: see the marker)
        reason = "patches the simulator core: tests/sim/test_native.py runs it on the Python core"
        for item in items:
            if "python_core" in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))
    gpu_items = [item for item in items if "gpu" in item.keywords]
    reason = None
    if gpu_items:
        from mkernel.hw import unavailable

        reason = unavailable()
    if reason:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=reason))
