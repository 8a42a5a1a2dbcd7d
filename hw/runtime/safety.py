"""Process-level settings every mkernel hw process must carry, applied at the process boundary.

NVLink multicast is forbidden on our shared machines (it can take a host's GPUs down for a day), so
every process mkernel starts, and every process that builds a hw context, sets these before CUDA,
NCCL or NVSHMEM initialise. The hw runtime never creates a multicast object and asserts that symmetric
memory handed out no multicast pointer.
"""
from __future__ import annotations

import os

NO_MULTICAST_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


def apply_no_multicast(env: dict[str, str] | None = None) -> dict[str, str]:
    """Force the no-multicast settings into ``env`` (default: this process's environment)."""
    target = os.environ if env is None else env
    target.update(NO_MULTICAST_ENV)
    return target
