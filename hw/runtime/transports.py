"""Transport names as users choose them, what each needs before anything launches, and the one
``auto`` picks.

- ``loopback``: ranks on one host that the cluster declares as different nodes. The native proxy
  copies with the copy engine and then sets the flag (csrc/transport_cuda.c); optional shaping
  (bandwidth, latency, seeded SRD-like reordering) mimics a NIC.
- ``verbs_rc``: InfiniBand or RoCE, one RC QP per peer (csrc/transport_verbs_rc.c).
- ``verbs_srd``: AWS EFA, SRD with RDMA write with immediate and a receiving proxy
  (csrc/transport_verbs_srd.c).
- ``ofi``: libfabric (efa, cxi, verbs;ofi_rxm, tcp;ofi_rxm, shm), the receiving-proxy protocol
  (csrc/transport_ofi.c).
- ``auto``: the best of these this host can use (:func:`auto`).
- ``fake``: host memory only, for CPU tests of the proxy.

The network transports are C, opened with dlopen when chosen; :func:`require` names what is
missing here (headers at build time, the library, a device) in one sentence. pyverbs is not needed
(``mkernel doctor`` uses it where it is installed). The simulator models each as its NIC protocol
(:data:`SIM_MODEL`).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

from mkernel.cluster import HW_TRANSPORTS  # what a user chooses for the GPU backend
from mkernel.errors import BackendUnavailable, InputError

from . import nics

KNOWN = (*HW_TRANSPORTS, "fake")  # and the host-memory fake of the CPU tests
NETWORK = ("verbs_rc", "verbs_srd", "ofi")
# how the simulator models each (mkernel.cluster.TRANSPORTS): RC orders a connection's writes; SRD
# and libfabric do not, and notify by the write's immediate (a receiving proxy)
SIM_MODEL = {"verbs_rc": "ib_rc", "verbs_srd": "efa_srd", "ofi": "efa_srd"}
DISCOVERED = ("efa", "cxi", "verbs;ofi_rxm", "tcp;ofi_rxm")  # the ofi transport's discovery order
EFA_RDMA_WRITE = 1 << 3  # efadv device_caps bit (rdma-core 46+)


@dataclass(frozen=True)
class Shaping:
    """Make the loopback look like a NIC: per-rank bandwidth, one-way latency, SRD-style reordering."""

    gbytes_per_s: float = 0.0  # 0: as fast as the copy engine
    latency_us: float = 0.0
    unordered: bool = False  # SRD: chunks may overtake each other (each flag still follows its data)
    streams: int = 4  # copy streams used when unordered
    seed: int = 0


def loadable(soname: str) -> str | None:
    """None if the shared library loads, else why not."""
    try:
        ctypes.CDLL(soname)
        return None
    except OSError as exc:
        return str(exc)


def ofi_providers() -> tuple[list[str], str | None]:
    """The libfabric providers that offer what the ofi transport needs, or ([], why not)."""
    from . import native

    if "ofi" not in native.features():
        return [], "mkernel's native library was built without rdma/fabric.h (install libfabric-dev; it rebuilds)"
    buf = ctypes.create_string_buffer(16384)
    if native.load().mk_ofi_providers(buf, 16384) < 0:
        return [], buf.value.decode()
    first = buf.value.decode().split("--")[0]
    return sorted({line.split()[0] for line in first.splitlines() if line.strip()}), None


def efa_caps(device: str) -> tuple[int, int, bool] | str:
    """(device_caps, max_rdma_size, libibverbs has ibv_reg_dmabuf_mr) of an EFA device, or why not."""
    from . import native

    caps, size, dmabuf = ctypes.c_uint32(), ctypes.c_uint32(), ctypes.c_int()
    err = ctypes.create_string_buffer(256)
    if native.load().mk_efa_caps(device.encode(), ctypes.byref(caps), ctypes.byref(size), ctypes.byref(dmabuf), err,
                                 256):
        return err.value.decode()
    return caps.value, size.value, bool(dmabuf.value)


def unusable(name: str, sysfs: Path = nics.SYSFS) -> str | None:
    """Why transport ``name`` cannot run between nodes from this host, or None if it can."""
    from . import native

    if name in ("verbs_rc", "verbs_srd"):
        if "verbs" not in native.features():
            return (f"transport {name!r}: mkernel's native library was built without infiniband/verbs.h "
                    f"(install libibverbs-dev; it rebuilds)")
        why = loadable("libibverbs.so.1")
        if why:
            return f"transport {name!r} needs libibverbs.so.1 (rdma-core), which could not be loaded: {why}"
        found = nics.nics(sysfs)
        if not found:
            return (f"transport {name!r} needs an RDMA device, and {sysfs / 'class' / 'infiniband'} lists none on "
                    f"this host (no RDMA device: no InfiniBand or EFA NIC, or its driver is not loaded); use "
                    f"'loopback' to emulate nodes on one host")
        if name == "verbs_srd":
            efa = [n for n in found if n.is_efa]
            if not efa:
                return (f"transport 'verbs_srd' needs an EFA device; this host has {', '.join(n.name for n in found)} "
                        f"(use 'verbs_rc' for InfiniBand)")
            why = loadable("libefa.so.1")
            if why:
                return f"transport 'verbs_srd' needs libefa.so.1 (rdma-core's EFA provider): {why}"
            caps = efa_caps(efa[0].name)
            if isinstance(caps, tuple) and not caps[0] & EFA_RDMA_WRITE:
                return (f"transport 'verbs_srd': {efa[0].name} reports no RDMA write (efadv caps {caps[0]:#x}; an "
                        f"EFA before the second generation, or rdma-core < 46); use 'ofi' with the efa provider")
            return None
        if not any(n.active and not n.is_efa for n in found):
            have = ", ".join(f"{n.name} ({'EFA' if n.is_efa else 'no active port'})" for n in found)
            return f"transport 'verbs_rc' needs an InfiniBand or RoCE device with an active port; this host has {have}"
        return None
    if name == "ofi":
        providers, why = ofi_providers()
        if why:
            return f"transport 'ofi': {why}"
        if not providers:
            return "transport 'ofi': libfabric offers no provider with RMA writes, remote CQ data and delivery-complete"
        return None
    if name not in KNOWN:
        raise InputError(f"transport {name!r} is not one of: {', '.join(KNOWN)}")
    return None


def require(name: str, sysfs: Path = nics.SYSFS) -> None:
    """Raise BackendUnavailable naming what transport ``name`` lacks here, else return."""
    why = unusable(name, sysfs)
    if why:
        raise BackendUnavailable(why)


def auto(sysfs: Path = nics.SYSFS) -> tuple[str, str]:
    """(transport, why): EFA -> verbs_srd (ofi's efa provider without RDMA write); an active
    InfiniBand or RoCE port -> verbs_rc; a libfabric NIC provider (efa, cxi, verbs) -> ofi; else
    loopback, which reaches only ranks on this host."""
    found = nics.nics(sysfs)
    if any(n.is_efa for n in found):
        if unusable("verbs_srd", sysfs) is None:
            return "verbs_srd", "an EFA device with RDMA write"
        if unusable("ofi", sysfs) is None and "efa" in ofi_providers()[0]:
            return "ofi", "an EFA device without RDMA write in verbs: libfabric's efa provider"
    if any(n.active and not n.is_efa for n in found) and unusable("verbs_rc", sysfs) is None:
        return "verbs_rc", "an InfiniBand or RoCE port is active"
    providers, _ = ofi_providers()
    nic = [p for p in DISCOVERED[:3] if p in providers]
    if nic:
        return "ofi", f"libfabric offers {nic[0]}"
    tcp = " ('ofi' over tcp;ofi_rxm reaches other hosts, slowly)" if "tcp;ofi_rxm" in providers else ""
    return "loopback", f"no RDMA device: nodes can only be emulated on this host{tcp}"


def check_hw_run(name: str) -> str:
    """Before ``mkernel run --backend hw`` launches anything: the transport its ranks use between
    their nodes (``auto`` resolved by :func:`auto`), or one clear error naming what this host lacks
    for ``name``. The hw run's ranks share this host, so a network transport between its nodes goes
    through this host's NIC or libfabric provider (the Context opens the endpoints) only when asked
by name: ``auto`` between ranks of one host is the loopback (:func:`Context` picks it so too)."""
    if name not in HW_TRANSPORTS:
        raise InputError(f"--transport {name!r} for --backend hw is not one of: auto, loopback, "
                         f"{', '.join(NETWORK)}")
    pick = "loopback" if name == "auto" else name
    if pick in NETWORK:
        require(pick)
    return pick


def resolve(name: str, shaping: Shaping | None = None) -> tuple[str, dict]:
    """(native transport name, its options) for a user-facing transport name, or a clear error.
    A network transport's options come from its bootstrap (:mod:`mkernel.hw.runtime.netboot`), not shaping."""
    if name not in KNOWN:
        raise InputError(f"transport {name!r} is not one of: {', '.join(KNOWN)}")
    if name == "auto":
        name = auto()[0]
    if name in NETWORK:
        require(name)
        if shaping is not None:
            raise InputError(f"transport {name!r}: shaping applies to 'loopback' only (a real NIC has its own)")
        return name, {}
    s = shaping or Shaping()
    opts = dict(seed=s.seed, unordered=s.unordered, gbytes_per_s=s.gbytes_per_s, latency_us=s.latency_us,
                streams=s.streams if s.unordered else 1)
    return ("cuda" if name == "loopback" else "fake"), opts
