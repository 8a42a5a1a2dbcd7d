"""mkernel.hw: the GPU backend (persistent kernels, symmetric buffers, command ring, host proxy).

Installed as ``mkernel.hw`` from the top-level ``hw/`` folder. The runtime (issue 5: ring, proxy,
transports, context, emulated cluster), the compute role (``gemm``) and lowering (``lower``) are
built; the fused op kernels (issue 6) are not, so :class:`HwBackend` still reports why it cannot run
a schedule, and the CLI turns that into a clear error instead of a launch.
"""
from __future__ import annotations

from mkernel.cluster import Cluster
from mkernel.errors import BackendUnavailable
from mkernel.ir import Schedule

__all__ = ["HwBackend", "unavailable"]


def unavailable() -> str | None:
    """Why the hw backend cannot run on this machine (no torch, no CuPy, no GPU), or None."""
    try:
        import torch
    except ImportError:
        return "the hw backend needs torch (pip install 'mkernel[hw]' on a machine with an NVIDIA GPU)"
    if not torch.cuda.is_available():
        return "the hw backend needs a CUDA GPU, and none is visible on this machine"
    try:
        import cupy  # noqa: F401
    except ImportError:
        return "the hw backend needs CuPy to load its device kernels (pip install 'mkernel[hw]')"
    return None


class HwBackend:
    name = "hw"

    def supports(self, schedule: Schedule, cluster: Cluster) -> str | None:
        return ("the hw backend's fused op kernels are not built yet (issue 6; its runtime is: `mkernel selftest` "
                "checks it on this machine's GPUs); use --backend sim")

    def run(self, schedule: Schedule, cluster: Cluster, **_kwargs):
        raise BackendUnavailable(self.supports(schedule, cluster))
