"""mkernel: fused multi-GPU, multi-node compute+communication kernels.

An op is declared once as a :class:`Schedule` (see :mod:`mkernel.ir`) by its builder
(:mod:`mkernel.builders`), checked by :func:`validate`, and executed by a backend: ``sim`` (SimPy)
or ``hw`` (GPUs). Importing this package loads the IR, clusters, workloads and scenarios alone (with the
standard library); numpy comes with the first of :func:`run`, :func:`validate` and :class:`ScheduleBuilder`
used, or with any module that needs it, so the ``mkernel`` command can set numpy's threads up before it
loads (:mod:`mkernel.cli`). No torch, SimPy or GPU: the PyTorch ops (``mkernel.gemm_ar``, ``gemm_rs``,
``ag_gemm``, ``ring_attention``, ``moe_plan`` + ``moe_dispatch_gemm``, and ``explain``, ``check``,
``close``, the ``fallback_*`` torch paths) load torch when first used.
"""
import importlib
from typing import TYPE_CHECKING

from .cluster import Cluster, GpuSpec, NicSpec, NvlinkSpec, ProxySpec
from .errors import (BackendUnavailable, DeadlockError, InputError, MkernelError, ProblemError,
                     ScenarioError, ScheduleError)
from .ir import Buffer, BufferKind, Launch, Op, Region, Role, Schedule, Signal, Task, Wait
from .problems import KERNELS, Workload
from .scenario import Scenario, load_scenario

if TYPE_CHECKING:  # (loaded on first use: __getattr__)
    from .runner import run
    from .schedule_builder import ScheduleBuilder
    from .validation import validate

__all__ = [
    "BackendUnavailable", "Buffer", "BufferKind", "Cluster", "DeadlockError", "GpuSpec", "InputError",
    "KERNELS", "Launch", "MkernelError", "NicSpec", "NvlinkSpec", "Op", "ProblemError", "ProxySpec",
    "Region", "Role", "Scenario", "ScenarioError", "Schedule", "ScheduleBuilder", "ScheduleError",
    "Signal", "Task", "Wait", "Workload", "load_scenario", "run", "validate",
]


TORCH_OPS = ("gemm_ar", "gemm_rs", "ag_gemm", "ring_attention", "moe_plan", "moe_dispatch_gemm", "explain",
             "check", "close", "configure", "MoeHandle")
FALLBACKS = ("fallback_gemm_ar", "fallback_gemm_rs", "fallback_ag_gemm", "fallback_ring_attention", "fallback_moe")
NUMPY_NAMES = {"run": "runner", "ScheduleBuilder": "schedule_builder", "validate": "validation"}  # name -> its module


def __dir__() -> list[str]:
    """The package's names, those loaded on first use (``NUMPY_NAMES``) among them before they are."""
    return sorted(set(globals()) | set(NUMPY_NAMES))


def __getattr__(name: str) -> object:
    """The PyTorch ops and their torch paths, imported on first use (:mod:`mkernel.hw.api`); the
    backends' packages too, so ``mkernel.hw.api.check()`` works after a plain ``import mkernel``
    (``mkernel.hw`` with its api and fallbacks loaded); and the names whose modules load numpy."""
    if name in NUMPY_NAMES:
        value = globals()[name] = getattr(importlib.import_module(f"{__name__}.{NUMPY_NAMES[name]}"), name)
        return value
    if name in ("hw", "sim"):
        module = importlib.import_module(f"{__name__}.{name}")
        if name == "hw":
            importlib.import_module(f"{__name__}.hw.api")
            importlib.import_module(f"{__name__}.hw.fallbacks")
        return module
    if name in TORCH_OPS or name in FALLBACKS:
        from .hw import api, fallbacks

        # kept here once found: a later ``mkernel.gemm_ar`` is a plain attribute, not this hook
        # (about 1 us of every eager call's host time otherwise)
        value = globals()[name] = getattr(api if name in TORCH_OPS else fallbacks, name)
        return value
    raise AttributeError(f"module 'mkernel' has no attribute {name!r}")
