"""``mkernel doctor``: what this host offers the transports between nodes, one line per finding and
one clear line for each thing that is missing.

It reads sysfs (devices, ports, link layers, GIDs), asks pyverbs where it is installed (firmware,
limits), asks mkernel's own native library for EFA capabilities, dmabuf support and libfabric's
providers (the same dlopen paths the transports use), maps each GPU to its NIC by PCIe distance (or
an explicit map), and ends with the transport ``auto`` would pick. ``require`` turns it into a
check: the last line is ``PASS`` or ``FAIL`` for that transport.
"""
from __future__ import annotations

from pathlib import Path

from ..runtime import nics, transports


def _pyverbs_lines() -> list[str]:
    try:
        import pyverbs.device as pd
    except ImportError:
        return ["pyverbs: not installed (sysfs and mkernel's own verbs loader are used instead)"]
    try:
        devices = pd.get_device_list()
    except Exception as exc:  # PyverbsRDMAError with no device; no other way to ask
        return [f"pyverbs: no RDMA device ({exc})"]
    out = []
    for d in devices:
        name = d.name.decode() if isinstance(d.name, bytes) else str(d.name)
        try:
            with pd.Context(name=name) as ctx:
                a = ctx.query_device()
                out.append(f"pyverbs: {name}: firmware {a.fw_ver.decode() if isinstance(a.fw_ver, bytes) else a.fw_ver}, "
                           f"{a.phys_port_cnt} port(s), max {a.max_qp} QPs, max MR {a.max_mr_size} bytes")
        except Exception as exc:  # noqa: BLE001 - a device pyverbs cannot open is a finding, not a crash
            out.append(f"pyverbs: {name}: cannot open: {exc}")
    return out or ["pyverbs: no RDMA device"]


def _nic_lines(found: list[nics.Nic]) -> list[str]:
    if not found:
        return ["RDMA devices: no RDMA device (/sys/class/infiniband lists none: no InfiniBand, RoCE or EFA NIC, or "
                "its driver is not loaded)"]
    out = [f"RDMA devices: {len(found)}"]
    for n in found:
        out.append(f"  {n.name}: driver {n.driver or '?'}, PCI {n.pci or '?'}{', EFA' if n.is_efa else ''}")
        for p in n.ports:
            lid = f", LID {p.lid:#x}" if p.link_layer == "InfiniBand" else ""
            out.append(f"    port {p.number}: {p.state or '?'}, link layer {p.link_layer or '?'}{lid}")
            for g in p.gids[:8]:
                out.append(f"      GID {g.index}: {g.address} {g.kind}".rstrip())
            if not p.gids:
                out.append("      no GID (the port has no address)")
        if n.is_efa:
            caps = transports.efa_caps(n.name)
            if isinstance(caps, str):
                out.append(f"    EFA capabilities: unknown ({caps})")
            else:
                bits = [name for bit, name in ((1, "rdma_read"), (2, "rnr_retry"), (4, "cq_with_sgid"),
                                               (8, "rdma_write"), (16, "unsolicited_write_recv")) if caps[0] & bit]
                out.append(f"    EFA capabilities: {', '.join(bits) or 'none'} (caps {caps[0]:#x}, max RDMA "
                           f"{caps[1]} bytes)")
                if not caps[0] & transports.EFA_RDMA_WRITE:
                    out.append("    missing: RDMA write (verbs_srd needs it; rdma-core < 46 cannot report it)")
    return out


def _library_lines() -> list[str]:
    from ..runtime import native

    out = []
    built = native.features()
    out.append(f"mkernel native library: built with {', '.join(sorted(built)) or 'no optional part'}"
               + ("" if {"verbs", "ofi"} <= built else
                  f"; missing at build time: {', '.join(sorted({'verbs', 'ofi'} - built))} (libibverbs-dev, "
                  f"libfabric-dev)"))
    for so in ("libibverbs.so.1", "libefa.so.1", "libfabric.so.1"):
        why = transports.loadable(so)
        out.append(f"{so}: {'loads' if why is None else 'missing: ' + why}")
    have = native.load().mk_verbs_dmabuf() if "verbs" in built else -1
    if have >= 0:
        out.append(f"dmabuf: libibverbs {'has' if have else 'lacks (rdma-core < 34)'} ibv_reg_dmabuf_mr; the GPU "
                   f"driver's support is checked when GPU memory is registered (peer memory is the fallback)")
    else:
        out.append("dmabuf: unknown (no libibverbs)")
    providers, why = transports.ofi_providers()
    if why:
        out.append(f"libfabric providers: unknown ({why})")
    else:
        out.append(f"libfabric providers with RMA, remote CQ data and delivery-complete: {', '.join(providers) or 'none'}")
    return out


def _gpu_lines(found: list[nics.Nic], nic_map: dict[int, str] | None, sysfs: Path) -> list[str]:
    gpus = nics.gpu_pci_ids()
    if not gpus:
        return ["GPUs: none visible (no NIC to choose per GPU)"]
    if not found:
        return [f"GPUs: {len(gpus)}; no RDMA device to give them"]
    out = [f"GPUs: {len(gpus)}"]
    for i, (nic, dist) in sorted(nics.choose(gpus, found, nic_map, sysfs).items()):
        how = "from the map" if dist is None and nic_map and i in nic_map else f"PCIe distance {dist}"
        out.append(f"  GPU {i} ({gpus[i]}) -> {nic} ({how})")
    return out


def report(sysfs: Path = nics.SYSFS, nic_map: dict[int, str] | None = None,
           require: str | None = None) -> tuple[list[str], bool]:
    """The doctor's lines, and whether ``require`` (a transport name) is usable here (True with none)."""
    found = nics.nics(sysfs)
    lines = _nic_lines(found) + _pyverbs_lines() + _library_lines() + _gpu_lines(found, nic_map, sysfs)
    pick, why = transports.auto(sysfs)
    lines.append(f"transport auto would pick: {pick} ({why})")
    for name in transports.NETWORK:
        reason = transports.unusable(name, sysfs)
        lines.append(f"{name}: {'usable' if reason is None else 'not usable: ' + reason}")
    if require is None:
        return lines, True
    name = pick if require == "auto" else require
    reason = transports.unusable(name, sysfs) if name in transports.NETWORK else None
    ok = reason is None and name in transports.NETWORK
    lines.append(f"PASS: {name} is usable between nodes from this host" if ok else
                 f"FAIL: {name}: {reason or 'it reaches only ranks on this host'}")
    return lines, ok
