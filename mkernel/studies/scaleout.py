"""Scale-out what-if clusters: the generator of ``scenarios/scaleout/*.toml``.

The paper measured two nodes; these scenarios ask what 2 to 64 nodes of 8 H200 do, built from the
calibrated H200 profile (``hardware = "h200"``) and the paper testbeds' NVLink and NIC estimates.
Four axes, every combination (48 files), plus a GB200-class what-if:

- ``nodes``: 2, 4, 8, 16, 32, 64 nodes x 8 GPUs;
- ``transport``: InfiniBand RC (ConnectX, ordered, one NIC per GPU) or AWS EFA SRD (unordered,
  two NICs per GPU, higher latency and per-message cost, per-message jitter);
- ``gbps``: 400 or 800 Gb/s per GPU;
- ``fabric``: ``rail`` (rail-optimised, non-blocking: every rail leaf reaches every node at full
  rate) or ``2to1`` (leaf switches of 2 nodes, a spine oversubscribed 2:1 between them: a
  message to another leaf shares the leaf's uplinks, half the leaf's NIC bandwidth).

``gb200-nvl72-800g-{2,4,8}x72``: 72 GPUs in one NVLink domain (NVLink 5, 900 GB/s per GPU each
way), 800 Gb/s InfiniBand per GPU, rail fabric. Only the fabric changes: the GPU stays the
calibrated H200, so the what-if isolates the domain size and NVLink rate from a faster GPU.

The workload table is a placeholder (the paper's GEMM+AllReduce); ``mkernel sweep`` replaces it
point by point. Rewrite the files with ``mkernel scaleout --out scenarios/scaleout``.
"""
from __future__ import annotations

from pathlib import Path

NODES = (2, 4, 8, 16, 32, 64)
NIC_ESTIMATES = {  # the paper testbeds' NIC estimates (scenarios/paper-*-2x8.toml)
    "ib": dict(transport="ib_rc", latency_us=2.0, per_message_us=0.5,
               nics={400: (1, 400.0), 800: (1, 800.0)}),
    "efa": dict(transport="efa_srd", latency_us=8.0, per_message_us=1.0,
                nics={400: (2, 200.0), 800: (2, 400.0)}),
}
GBPS = (400, 800)
FABRICS = {"rail": None, "2to1": (2, 2.0)}  # (nodes per leaf, spine oversubscription)
GB200_DOMAINS = (2, 4, 8)


def _toml(name: str, description: str, *, nodes: int, gpus: int, transport: str, nic_count: int,
          gbit: float, latency_us: float, per_message_us: float, fabric, nvlink_gb: float | None) -> str:
    """One scenario; ``nvlink_gb`` None keeps the profile's NVLink terms (measured on an H200 pair)."""
    lines = [f'name = "{name}"', f'description = "{description}"', "",
             "[cluster]  # GPU, NVLink and proxy terms: the calibrated profile (scenarios/hardware/h200.toml)",
             'hardware = "h200"', f"nodes = {nodes}", f"gpus_per_node = {gpus}", f'transport = "{transport}"', ""]
    if nvlink_gb is not None:
        lines += ["[cluster.nvlink]  # a faster NVLink: per GPU each way; the rest is the H200's, measured",
                  f"bw_gb_per_s = {nvlink_gb}", ""]
    lines += ["[cluster.nic]  # latency and per-message cost: the paper testbeds' estimates",
             f"count = {nic_count}", f"gbit_per_s = {gbit}", f"latency_us = {latency_us}",
             f"per_message_us = {per_message_us}", "",
             "[cluster.proxy]  # a NIC doorbell is one MMIO write (estimate)", "doorbell_us = 0.2", ""]
    if fabric is not None:
        lines += ["[cluster.fabric]  # leaf groups joined by an oversubscribed spine",
                  f"nodes_per_leaf = {fabric[0]}", f"oversubscription = {fabric[1]}", ""]
    lines += ["[workload]  # a placeholder: mkernel sweep sets the op and shape of each point",
              'kernel = "gemm_ar"', "m = 8192", "n = 8192", "k = 512", ""]
    return "\n".join(lines)


def scenarios() -> dict[str, str]:
    """Every scale-out scenario: file stem -> TOML text."""
    out = {}
    for tname, t in NIC_ESTIMATES.items():
        for gbps in GBPS:
            count, gbit = t["nics"][gbps]
            for fname, fabric in FABRICS.items():
                for nodes in NODES:
                    name = f"{tname}-{gbps}g-{fname}-{nodes}x8"
                    fab = "rail-optimised, non-blocking" if fabric is None else \
                        f"leaf groups of {fabric[0]} nodes, spine oversubscribed {fabric[1]:g}:1"
                    desc = (f"{nodes} nodes x 8 H200, {t['transport']}, {count} x {gbit:g} Gb/s per GPU, {fab}")
                    out[name] = _toml(name, desc, nodes=nodes, gpus=8, transport=t["transport"], nic_count=count,
                                      gbit=gbit, latency_us=t["latency_us"], per_message_us=t["per_message_us"],
                                      fabric=fabric, nvlink_gb=None)
    for domains in GB200_DOMAINS:
        name = f"gb200-nvl72-800g-{domains}x72"
        desc = (f"GB200-class what-if: {domains} NVLink domains x 72 GPUs (H200 compute, NVLink 900 GB/s), "
                "ib_rc, 800 Gb/s per GPU, rail-optimised")
        out[name] = _toml(name, desc, nodes=domains, gpus=72, transport="ib_rc", nic_count=1, gbit=800.0,
                          latency_us=2.0, per_message_us=0.5, fabric=None, nvlink_gb=900.0)
    return out


def write(folder: Path) -> list[Path]:
    """Write every scenario into ``folder`` (created); returns the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in scenarios().items():
        path = folder / f"{name}.toml"
        path.write_text(text)
        paths.append(path)
    return paths
