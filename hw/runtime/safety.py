"""Process-level settings every mkernel hw process must carry, applied at the process boundary:
the no-multicast environment, and the default rendezvous of a process that starts its own
single-host group.

NVLink multicast is forbidden on our shared machines (it can take a host's GPUs down for a day), so
these are set before CUDA, NCCL or NVSHMEM initialise, once, where a process enters mkernel: the CLI's
``main``, the torch ops' first executor (:mod:`mkernel.hw.ops`), the environment of every rank the
launcher spawns (:mod:`mkernel.hw.runtime.emulate`), netcheck's ``main``, the tools' ``main`` and the
test session (tests/conftest.py). Below that boundary the runtime only checks
(:func:`require_no_multicast`): a hw context refuses to start in a process that lacks them. It never
creates a multicast object and asserts that symmetric memory handed out no multicast pointer.

A process that is not started by torchrun but needs a process group (the fused path's symmetric
memory needs one even at world 1) initialises it from ``MASTER_ADDR`` / ``MASTER_PORT``;
:func:`apply_rendezvous` defaults them, at the same entries, to this host and a port of its own per
entry (:data:`RENDEZVOUS_PORT` plus the entry's offset in :data:`PORT_OFFSET`): the group's rank 0
binds that port, so two entries run at once on one host (each on its own GPU) must not share it.
torchrun's own variables, where set, win.
"""
from __future__ import annotations

import os

from mkernel.errors import BackendUnavailable, InputError

NO_MULTICAST_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


RENDEZVOUS_ADDR = "127.0.0.1"  # a process's own group: every rank on this host
RENDEZVOUS_PORT = 29530  # above torchrun's default 29500, so a torchrun job beside it keeps its port
PORT_OFFSET = {  # one port per entry that starts its own group
    "calibrate": 1,  # mkernel calibrate (a world-1 gloo group for the fused attention op)
    "bench": 2,  # mkernel bench on one rank, outside torchrun
    "bench_api": 3,  # tools/bench/
    "bench_fused": 4,
    "bench_train": 5,
    "attn_crash_probe": 6,  # tools/probes/
    "attn_fused": 7,
    "host_path": 8,
}


def apply_rendezvous(entry: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """Default ``MASTER_ADDR`` and ``MASTER_PORT`` in ``env`` (default: this process's environment)
    to this host and ``entry``'s own port; values already set (torchrun's, the user's) stay."""
    if entry not in PORT_OFFSET:
        raise InputError(f"apply_rendezvous({entry!r}): not an entry of PORT_OFFSET ({', '.join(PORT_OFFSET)})")
    target = os.environ if env is None else env
    target.setdefault("MASTER_ADDR", RENDEZVOUS_ADDR)
    target.setdefault("MASTER_PORT", str(RENDEZVOUS_PORT + PORT_OFFSET[entry]))
    return target


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
