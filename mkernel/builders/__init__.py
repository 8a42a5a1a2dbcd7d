"""One builder module per fused op; this registry finds them by kernel id.

A builder module provides ``check(workload, cluster)``, ``build`` (the fused schedule),
``build_baseline`` (the unfused schedule in the same IR), ``flops_per_gpu`` and ``make_inputs``.
Its numpy oracle lives in :mod:`mkernel.reference` under the same kernel id. Builders of
node-symmetric ops also take ``first_nodes``, and the fused builds of rotation-symmetric ones
``local_fold`` (see :class:`mkernel.schedule_builder.ScheduleBuilder`).
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


def local_symmetric(w, c) -> bool:
    """Whether ``build(w, c, first_nodes=n, local_fold=True)`` is exact: the op is node-symmetric
    and every local rank runs local rank 0's queues rotated (tests/sim/test_localfold.py checks it
    against the simulator's own check of full builds). The fused builds of GEMM+RS, AG+GEMM and
    ring attention always rotate; GEMM+AR's when its tiles deal evenly (``gemm_ar.local_symmetric``);
    MoE's routing does not rotate."""
    if c.gpus_per_node < 2 or w.kernel == "moe_dispatch_gemm" or not node_symmetric(w, c):
        return False
    if w.kernel == "gemm_ar":
        return get(w.kernel).local_symmetric(w, c)
    return True


def local_baseline(w, c) -> bool:
    """Whether ``build_baseline(w, c, first_nodes=n, library_tasks=False, local_fold=True)`` is exact:
    a timing build of the baseline leaves its collective's tasks out (its launch is timed as the
    NCCL call), so its tiles rotate as plainly as the fused op's; with ``collectives = "ir"`` the
    declared rings are built and run, and their signals are not declared for renaming."""
    return local_symmetric(w, c) and w.collectives == "nccl"
