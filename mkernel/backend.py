"""The narrow interface every backend implements, and the lazy registry that finds them.

A backend is a function over a Schedule: ``run(schedule, cluster, inputs=..., seed=...)`` returns
:class:`RunStats`; its :class:`Capabilities` say what it does (the runner reads them, never the
name). Backends are imported only when asked for, so ``import mkernel`` never needs
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
from .members import RegionTable

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


@dataclass(frozen=True)
class Capabilities:
    """What a backend does, declared once on it, so the runner reads these instead of its name."""

    where: str  # where it runs, for progress lines: "in the simulator", "on the GPUs"
    predicts: bool  # its times are the model's predictions ("predicted"), not measurements; it is the
    #                 simulator ``auto`` decides by, so the same timing run's choice is reused, and its
    #                 progress covers each simulated variant
    grouped: bool  # runs schedules built with grouped tasks (the simulator's)
    models_library: bool  # times library calls by their models (mkernel.sim.library): a data run's baseline
    #                       is retimed in a timing run, and the paper's baseline is timed beside ours
    always_data: bool  # always runs on data and checks its outputs against the oracle
    samples: bool  # data mode on sampled rows and columns where whole arrays are large (mkernel.sampling)
    collapses: bool  # can run one node of a node-symmetric schedule (``collapse``)
    proxy_metrics: bool  # reports the proxy's counters (runner.PROXY_KEYS) in ``RunStats.metrics``
    own_trajectory: bool  # an adaptive run's trajectory comes back in metrics["trajectory"]; else the
    #                       controller is the runner's hook (mkernel.controller.sim_controller)
    faults_in_proxy: bool  # injects faults in the host proxy, which a one-node run has none of


class Backend(Protocol):
    name: str
    caps: Capabilities
    rtol: float  # the relative error its data mode accepts

    def supports(self, schedule: Schedule, cluster: Cluster) -> str | None:
        """None if this backend can run the schedule here, else the reason it cannot."""

    def cluster_for(self, cluster: Cluster) -> Cluster:
        """The cluster as this backend runs it on this machine (schedules are built for it)."""

    def folds_locals(self, cluster: Cluster) -> bool:
        """Whether a quiet collapsed run on ``cluster`` may be built for local rank 0 alone."""

    def options(self, *, transport: str | None = None, heap: str | None = None,
                faults: str | None = None) -> dict:
        """The run options a command line gives this backend, checked and parsed before anything is
        built or launched (one clear error for one it does not take): the keyword arguments of
        :meth:`run` they become (``transport``, ``heap``, ``faults``), those it has no use for left out."""

    def run(self, schedule: Schedule, cluster: Cluster, *, inputs: dict[str, list[np.ndarray]] | None = None,
            seed: int = 0, trace: bool = False, workload=None, collapse: bool = False, faults=None,
            controller=None, progress=None, sample=None, hazards: bool | None = None,
            transport: str = "loopback", heap: str = "device", regions: RegionTable | None = None) -> RunStats:
        """Execute the schedule; with ``inputs``, on real data, returning the output buffers.

        Every backend takes every option and says where one does not apply: ``workload`` (the
        :class:`~mkernel.problems.Workload` the schedule was built from; the hw backend's baseline
        runs it as the op's torch fallback), ``collapse`` (simulate one node of a node-symmetric
        schedule: sim only; the hw backend refuses it), ``faults`` (the backend's own fault
        injection: :class:`mkernel.sim.faults.Faults` or :class:`mkernel.hw.runtime.proxy.ProxyFaults`),
        ``controller`` (the adaptive SM partition: a policy or the simulator's hook), ``progress``
        (hears how far a simulated run is), ``sample`` (a :class:`mkernel.sampling.Plan`: data on its
        rows and columns; a backend that does not sample refuses one), ``hazards`` (the simulator's
        hazard tracking), ``transport`` and ``heap`` (the hw fused run's
        :class:`~mkernel.hw.runtime.context.Context`; the simulator models the network from
        ``cluster.transport``), ``regions`` (the schedule's region table as ``Schedule.validate()``
        returned it: the simulator's hazard grids read it; a GPU run has no use for it)."""


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
