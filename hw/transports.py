"""Transport names as users choose them, and what each needs before anything launches.

- ``loopback``: ranks on one host that the cluster declares as different nodes. The native proxy
  copies with the copy engine and then sets the flag (csrc/transport_cuda.c); optional shaping
  (bandwidth, latency, seeded SRD-like reordering) mimics a NIC.
- ``verbs_rc`` / ``verbs_srd``: RDMA through pyverbs (InfiniBand RC; AWS EFA SRD with
  write-with-immediate). They need pyverbs and an RDMA device; without them, choosing one fails at
  once with an error that names what is missing.
- ``fake``: host memory only, for CPU tests of the proxy.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mkernel.errors import BackendUnavailable, InputError

TRANSPORTS = ("loopback", "verbs_rc", "verbs_srd", "fake")


@dataclass(frozen=True)
class Shaping:
    """Make the loopback look like a NIC: per-rank bandwidth, one-way latency, SRD-style reordering."""

    gbytes_per_s: float = 0.0  # 0: as fast as the copy engine
    latency_us: float = 0.0
    unordered: bool = False  # SRD: chunks may overtake each other (each flag still follows its data)
    streams: int = 4  # copy streams used when unordered
    seed: int = 0


def rdma_devices(sysfs: Path = Path("/sys/class/infiniband")) -> list[str]:
    """RDMA devices the kernel exposes (names under /sys/class/infiniband)."""
    return sorted(p.name for p in sysfs.iterdir()) if sysfs.is_dir() else []


def require_verbs(name: str, sysfs: Path = Path("/sys/class/infiniband")) -> None:
    """Raise BackendUnavailable naming what is missing for a verbs transport, else return."""
    try:
        import pyverbs  # noqa: F401
        import pyverbs.device  # noqa: F401
    except ImportError:
        raise BackendUnavailable(f"transport {name!r} needs pyverbs, which is not installed "
                                 f"(pip install 'mkernel[hw]' brings it)") from None
    devices = rdma_devices(sysfs)
    if not devices:
        raise BackendUnavailable(f"transport {name!r} needs an RDMA device, and {sysfs} lists none on this host "
                                 f"(no InfiniBand or EFA NIC, or its driver is not loaded); use 'loopback' to "
                                 f"emulate nodes on one host")
    if name == "verbs_srd" and not any(d.startswith("efa") for d in devices):
        raise BackendUnavailable(f"transport 'verbs_srd' needs an EFA device; this host has {', '.join(devices)} "
                                 f"(use 'verbs_rc' for InfiniBand)")
    raise BackendUnavailable(f"transport {name!r}: RDMA devices {', '.join(devices)} are present, but mkernel's "
                             f"verbs data path is not built yet; use 'loopback'")


def resolve(name: str, shaping: Shaping | None = None) -> tuple[str, dict]:
    """(native transport name, its options) for a user-facing transport name, or a clear error."""
    if name not in TRANSPORTS:
        raise InputError(f"transport {name!r} is not one of: {', '.join(TRANSPORTS)}")
    if name.startswith("verbs"):
        require_verbs(name)
    s = shaping or Shaping()
    opts = dict(seed=s.seed, unordered=s.unordered, gbytes_per_s=s.gbytes_per_s, latency_us=s.latency_us,
                streams=s.streams if s.unordered else 1)
    return ("cuda" if name == "loopback" else "fake"), opts
