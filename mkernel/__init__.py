"""mkernel: fused multi-GPU, multi-node compute+communication kernels.

An op is declared once as a :class:`Schedule` (see :mod:`mkernel.ir`) by its builder
(:mod:`mkernel.builders`), checked by :func:`validate`, and executed by a backend: ``sim`` (SimPy)
or ``hw`` (GPUs). Importing this package needs only numpy: no torch, SimPy or GPU; the PyTorch
ops (``mkernel.gemm_ar``, ``gemm_rs``, ``ag_gemm``, ``ring_attention``, ``moe_plan`` +
``moe_dispatch_gemm``, and ``explain``, ``check``, ``close``, the ``fallback_*`` torch paths) load
torch when first used.
"""
from .cluster import Cluster, GpuSpec, NicSpec, NvlinkSpec, ProxySpec
from .errors import (BackendUnavailable, DeadlockError, InputError, MkernelError, ProblemError,
                     ScenarioError, ScheduleError)
from .ir import Buffer, BufferKind, Launch, Op, Region, Role, Schedule, Signal, Task, Wait
from .problems import KERNELS, Workload
from .runner import run
from .scenario import Scenario, load_scenario
from .schedule_builder import ScheduleBuilder
from .validate import validate

__all__ = [
    "BackendUnavailable", "Buffer", "BufferKind", "Cluster", "DeadlockError", "GpuSpec", "InputError",
    "KERNELS", "Launch", "MkernelError", "NicSpec", "NvlinkSpec", "Op", "ProblemError", "ProxySpec",
    "Region", "Role", "Scenario", "ScenarioError", "Schedule", "ScheduleBuilder", "ScheduleError",
    "Signal", "Task", "Wait", "Workload", "load_scenario", "run", "validate",
]


TORCH_OPS = ("gemm_ar", "gemm_rs", "ag_gemm", "ring_attention", "moe_plan", "moe_dispatch_gemm", "explain",
             "check", "close", "configure", "MoeHandle")
FALLBACKS = ("fallback_gemm_ar", "fallback_gemm_rs", "fallback_ag_gemm", "fallback_ring_attention", "fallback_moe")


def __getattr__(name: str):
    """The PyTorch ops and their torch paths, imported on first use (:mod:`mkernel.hw.api`); the
    backends' packages too, so ``mkernel.hw.api.check()`` works after a plain ``import mkernel``
    (``mkernel.hw`` with its api and fallbacks loaded)."""
    if name in ("hw", "sim"):
        import importlib

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
