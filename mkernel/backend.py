"""The narrow interface every backend implements, and the lazy registry that finds them.

A backend is a function over a Schedule: ``run(schedule, cluster, inputs=..., seed=...)`` returns
:class:`RunStats`. Backends are imported only when asked for, so ``import mkernel`` never needs
torch, a GPU or even SimPy.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from .cluster import Cluster
from .errors import BackendUnavailable, InputError
from .ir import Schedule

BACKENDS = {"sim": "mkernel.sim:SimBackend", "hw": "mkernel.hw:HwBackend"}


@dataclass(frozen=True)
class RunStats:
    """What one backend run of one schedule measured. Times are seconds; bytes are sent bytes."""

    time_s: float  # the slowest rank
    per_rank_s: tuple[float, ...]
    bytes_total: dict[str, float]  # per tier (nvlink, network, host), summed over ranks
    bytes_per_gpu: dict[str, float]  # per tier, the largest rank
    wall_s: float
    events: int | None = None
    outputs: dict[str, list[np.ndarray]] | None = None  # data mode only
    spans: list[tuple] | None = None  # (rank, track, slot, name, start_us, end_us), when traced
    counters: list[tuple] | None = None  # (rank, track, [(time_us, value)]), when traced
    hazards: tuple[dict, ...] = field(default_factory=tuple)
    metrics: dict = field(default_factory=dict)  # backend-specific counters (proxy, breakdown)


class Backend(Protocol):
    name: str

    def supports(self, schedule: Schedule, cluster: Cluster) -> str | None:
        """None if this backend can run the schedule here, else the reason it cannot."""

    def run(self, schedule: Schedule, cluster: Cluster, *, inputs: dict[str, list[np.ndarray]] | None = None,
            seed: int = 0, trace: bool = False, workload=None, collapse: bool = False, faults=None,
            controller=None) -> RunStats:
        """Execute the schedule; with ``inputs``, on real data, returning the output buffers.

        Every backend takes every option and says where one does not apply: ``workload`` (the
        :class:`~mkernel.problems.Workload` the schedule was built from; the hw backend's baseline
        runs it as the op's torch fallback), ``collapse`` (simulate one node of a node-symmetric
        schedule: sim only; the hw backend refuses it), ``faults`` (the backend's own fault
        injection: :class:`mkernel.sim.faults.Faults` or :class:`mkernel.hw.runtime.proxy.ProxyFaults`)
        and ``controller`` (the adaptive SM partition: a policy or the simulator's hook)."""


def get_backend(name: str) -> Backend:
    """Instantiate a backend by name, importing its package only now."""
    if name not in BACKENDS:
        raise InputError(f"unknown backend {name!r}; allowed: {', '.join(BACKENDS)}")
    module_name, cls = BACKENDS[name].split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BackendUnavailable(f"backend {name!r} needs a package that is not installed: {exc.name}") from None
    return getattr(module, cls)()
