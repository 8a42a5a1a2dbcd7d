"""One builder module per fused op; this registry finds them by kernel id.

A builder module provides ``check(workload, cluster)``, ``build`` (the fused schedule),
``build_baseline`` (the unfused schedule in the same IR), ``flops_per_gpu`` and ``make_inputs``.
Its numpy oracle lives in :mod:`mkernel.reference` under the same kernel id. Builders of
node-symmetric ops also take ``first_nodes`` (see :class:`mkernel.schedule_builder.ScheduleBuilder`).
"""
from __future__ import annotations

import importlib
from types import ModuleType

from ..errors import InputError
from ..problems import KERNELS


def get(kernel: str) -> ModuleType:
    """The builder module of ``kernel``; a clear error for an unknown one."""
    if kernel not in KERNELS:
        raise InputError(f"unknown kernel {kernel!r}; allowed: {', '.join(KERNELS)}")
    return importlib.import_module(f"{__name__}.{kernel}")


def node_symmetric(w, c) -> bool:
    """Whether ``build(w, c, first_nodes=n)`` is exact: every node runs node 0's queues under the
    node shift (tests/core/test_symmetry.py checks it against full builds). MoE routing drawn per rank
    depends on the rank (the shifted routings do not); GEMM+AR's grouped algorithms need tiles of one
    shape; causal attention pairs its tiles' counters on several nodes to be (ring_attention)."""
    if c.nodes < 2:
        return False
    if w.kernel == "moe_dispatch_gemm":
        return get(w.kernel).node_symmetric(w)
    if w.kernel == "gemm_ar":
        return get(w.kernel).node_symmetric(w, c)
    return True
