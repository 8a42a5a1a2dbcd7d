"""Process-level settings every mkernel hw process must carry, applied at the process boundary.

NVLink multicast is forbidden on our shared machines (it can take a host's GPUs down for a day), so
these are set before CUDA, NCCL or NVSHMEM initialise, once, where a process enters mkernel: the CLI's
``main``, the torch ops' first executor (:mod:`mkernel.hw.ops`), the environment of every rank the
launcher spawns (:mod:`mkernel.hw.runtime.emulate`), netcheck's ``main``, the tools' ``main`` and the
test session (tests/conftest.py). Below that boundary the runtime only checks
(:func:`require_no_multicast`): a hw context refuses to start in a process that lacks them. It never
creates a multicast object and asserts that symmetric memory handed out no multicast pointer.
"""
from __future__ import annotations

import os

from mkernel.errors import BackendUnavailable

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


def require_no_multicast() -> None:
    """Refuse, before any CUDA work, a process whose environment lets NVLink multicast on."""
    wrong = {k: os.environ.get(k) for k, v in NO_MULTICAST_ENV.items() if os.environ.get(k) != v}
    if wrong:
        want = " ".join(f"{k}={v}" for k, v in NO_MULTICAST_ENV.items())
        raise BackendUnavailable(f"NVLink multicast must be off in this process before CUDA starts: {want} "
                                 f"(found {wrong}); mkernel's CLI, torch ops and launcher set them at entry, "
                                 f"a script that builds a hw Context itself must call "
                                 f"mkernel.hw.runtime.safety.apply_no_multicast() first")
