"""RDMA NICs as the kernel exposes them in sysfs, and the NIC each GPU should use.

Everything here reads files (``/sys/class/infiniband``, ``/sys/bus/pci/devices``), so it works with
no RDMA library and on a machine with no NIC (where it finds none). A GPU uses the NIC nearest it
on the PCIe tree (the fewest hops to their common ancestor: the same switch beats the same root
port beats another socket), ties going to the NIC fewer GPUs use so far, unless an explicit map
names it.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mkernel.errors import InputError

SYSFS = Path("/sys")
_PCI = re.compile(r"^(pci[0-9a-f]{4}:[0-9a-f]{2}|[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])$")  # host bridge, device


@dataclass(frozen=True)
class Gid:
    index: int
    address: str
    kind: str  # "IB/RoCE v1", "RoCE v2", or "" where sysfs gives no type


@dataclass(frozen=True)
class Port:
    number: int
    state: str  # ACTIVE, DOWN, ...
    link_layer: str  # InfiniBand, Ethernet, Unspecified (EFA)
    lid: int
    gids: tuple[Gid, ...]


@dataclass(frozen=True)
class Nic:
    name: str
    driver: str  # mlx5_core, efa, ...
    pci: str  # its PCI address, "" when sysfs names none
    pci_chain: tuple[str, ...]  # its host bridge and the PCI addresses down to it
    ports: tuple[Port, ...]

    @property
    def is_efa(self) -> bool:
        return self.driver == "efa" or self.name.startswith("efa")

    @property
    def active(self) -> bool:
        return any(p.state == "ACTIVE" for p in self.ports)


def _read(path: Path, default: str = "") -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return default


def pci_chain(device: Path) -> tuple[str, ...]:
    """The host bridge and PCI addresses on the way down to a sysfs device folder (symlinks resolved)."""
    try:
        parts = device.resolve().parts
    except OSError:
        return ()
    return tuple(p for p in parts if _PCI.match(p))


def _ports(dev: Path) -> tuple[Port, ...]:
    out = []
    for p in sorted((dev / "ports").glob("*"), key=lambda q: int(q.name) if q.name.isdigit() else 0):
        if not p.name.isdigit():
            continue
        gids = []
        for g in sorted((p / "gids").glob("*"), key=lambda q: int(q.name) if q.name.isdigit() else 0):
            addr = _read(g)
            if g.name.isdigit() and addr and addr.strip("0:"):
                gids.append(Gid(int(g.name), addr, _read(p / "gid_attrs" / "types" / g.name)))
        state = _read(p / "state").partition(":")[2].strip() or _read(p / "state")
        lid = _read(p / "lid", "0")
        out.append(Port(int(p.name), state, _read(p / "link_layer"), int(lid, 16) if lid.startswith("0x") else 0,
                        tuple(gids)))
    return tuple(out)


def nics(sysfs: Path = SYSFS) -> list[Nic]:
    """Every RDMA device sysfs lists, with its driver, PCI position and ports."""
    root = sysfs / "class" / "infiniband"
    if not root.is_dir():
        return []
    out = []
    for dev in sorted(root.iterdir()):
        chain = pci_chain(dev / "device")
        driver = (dev / "device" / "driver").resolve().name if (dev / "device" / "driver").exists() else ""
        out.append(Nic(dev.name, driver, chain[-1] if chain else "", chain, _ports(dev)))
    return out


def gpu_pci_ids() -> list[str]:
    """The PCI addresses of the visible GPUs, in CUDA order: from torch where it says, else
    nvidia-smi, else none."""
    try:
        import torch

        if torch.cuda.is_available():
            props = [torch.cuda.get_device_properties(i) for i in range(torch.cuda.device_count())]
            if all(hasattr(p, "pci_bus_id") for p in props):
                return [f"{getattr(p, 'pci_domain_id', 0):04x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0" for p in props]
    except ImportError:
        pass
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        res = subprocess.run([smi, "--query-gpu=pci.bus_id", "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip().lower()[-12:] for line in res.stdout.splitlines() if line.strip()]


def distance(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    """PCIe hops between two devices through their nearest common ancestor (under different host
    bridges: both depths, plus 2 for the trip between them)."""
    common = 0
    for x, y in zip(a, b):
        if x != y:
            break
        common += 1
    return len(a) + len(b) - 2 * common + (2 if common == 0 else 0)


def parse_nic_map(text: str) -> dict[int, str]:
    """``"0=mlx5_0,1=mlx5_1"`` -> {0: "mlx5_0", 1: "mlx5_1"} (GPU index = NIC name)."""
    out = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        gpu, sep, nic = item.partition("=")
        if not sep or not gpu.strip().isdigit() or not nic.strip():
            raise InputError(f"NIC map item {item!r}: expected GPU=NIC, e.g. 0=mlx5_0")
        out[int(gpu)] = nic.strip()
    return out


def choose(gpus: list[str], found: list[Nic], explicit: dict[int, str] | None = None,
           sysfs: Path = SYSFS) -> dict[int, tuple[str, int | None]]:
    """GPU index -> (NIC name, PCIe distance, None where unknown or given) for every GPU: the explicit
    map first (each name checked), then the nearest active NIC, ties to the least used."""
    explicit = explicit or {}
    names = {n.name for n in found}
    for gpu, nic in explicit.items():
        if nic not in names:
            raise InputError(f"NIC map: GPU {gpu} -> {nic}, which is not an RDMA device here "
                             f"({', '.join(sorted(names)) or 'none'})")
    usable = [n for n in found if n.active] or found
    use = {n.name: 0 for n in usable}
    out: dict[int, tuple[str, int | None]] = {}
    for i, bdf in enumerate(gpus):
        if i in explicit:
            out[i] = (explicit[i], None)
            continue
        if not usable:
            continue
        chain = pci_chain(sysfs / "bus" / "pci" / "devices" / bdf)
        ranked = sorted(usable, key=lambda n: (distance(chain, n.pci_chain) if chain and n.pci_chain else 1 << 20,
                                               use[n.name], n.name))
        best = ranked[0]
        use[best.name] += 1
        out[i] = (best.name, distance(chain, best.pci_chain) if chain and best.pci_chain else None)
    return out


def roce_gid_index(port: Port) -> int:
    """The GID a RoCE port should use: RoCE v2 with an IPv4-mapped address, else any RoCE v2, else
    -1 (InfiniBand uses the LID; EFA its GID 0)."""
    if port.link_layer != "Ethernet":
        return -1
    v2 = [g for g in port.gids if g.kind.lower().startswith("roce v2")]
    mapped = [g for g in v2 if g.address.startswith("0000:0000:0000:0000:0000:ffff")]
    pick = mapped or v2 or list(port.gids)
    return pick[0].index if pick else -1
