"""The machine a schedule runs on: nodes x GPUs, and the specs of each tier.

Ranks are numbered ``rank = node * gpus_per_node + local``. Rail peers are the ranks with the same
local index on different nodes; in a rail-optimized fabric only they talk across the network.

Defaults are H200 figures. Where a figure was measured on our machine it says so
(../shared/design/h200-facts.md); the rest are datasheet values or estimates until calibration
(issue 8) replaces them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

TRANSPORTS = ("ib_rc", "efa_srd")


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One GPU. ``matmul_tflops`` is the sustained bf16 rate of a large GEMM on all SMs."""

    name: str = "H200"
    sms: int = 132
    matmul_tflops: float = 798.0  # measured: torch.matmul bf16 8192^3 on the lent H200
    hbm_gb_per_s: float = 4260.0  # measured: device-to-device copy, bytes read + written
    sm_stream_gb_per_s: float = 100.0  # estimate: local HBM traffic one communication SM can drive
    l2_operand_miss: float = 0.1  # estimate: share of a GEMM tile's A/B reads that miss L2 and reach HBM
    memory_gib: float = 139.0


@dataclass(frozen=True, slots=True)
class NvlinkSpec:
    """The NVLink/NVSwitch port of one GPU: bandwidth per direction, and what one SM can drive."""

    bw_gb_per_s: float = 450.0  # H200 NVLink 4, per direction
    latency_us: float = 1.0  # estimate: peer store visible at the peer
    sm_copy_gb_per_s: float = 30.0  # estimate: one SM's peer copy rate; ~16 SMs saturate a port


@dataclass(frozen=True, slots=True)
class NicSpec:
    """The NICs of one GPU (rail). ``count`` NICs of ``gbit_per_s`` each serve that GPU."""

    count: int = 1
    gbit_per_s: float = 400.0
    latency_us: float = 2.0  # estimate: RDMA write, one switch hop
    per_message_us: float = 0.5  # estimate: NIC work per work request

    @property
    def gb_per_s(self) -> float:
        """Aggregate bandwidth of this GPU's NICs in GB/s (one direction)."""
        return self.count * self.gbit_per_s / 8.0


@dataclass(frozen=True, slots=True)
class ProxySpec:
    """The host proxy that turns GPU commands into RDMA work requests."""

    gpu_enqueue_us: float = 0.5  # a send block writes a 48-byte command to pinned host memory
    poll_us: float = 0.5  # the proxy polls the ring at this interval
    per_command_us: float = 0.3  # host cost to post one command
    batch: int = 8  # commands per submission (used by the full proxy model)
    queue_depth: int = 1024  # ring entries (credits)


@dataclass(frozen=True, slots=True)
class Cluster:
    """Nodes x GPUs per node, with one spec per tier. Immutable; build variants with ``replace``."""

    name: str
    nodes: int
    gpus_per_node: int
    transport: str = "ib_rc"
    gpu: GpuSpec = field(default_factory=GpuSpec)
    nvlink: NvlinkSpec = field(default_factory=NvlinkSpec)
    nic: NicSpec = field(default_factory=NicSpec)
    proxy: ProxySpec = field(default_factory=ProxySpec)
    launch_us: float = 4.0  # estimate: gap between two stream-ordered kernel launches

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.gpus_per_node < 1:
            raise ValueError(f"cluster needs nodes >= 1 and gpus_per_node >= 1, got {self.nodes}x{self.gpus_per_node}")
        if self.transport not in TRANSPORTS:
            raise ValueError(f"transport {self.transport!r} is not one of {TRANSPORTS}")

    @property
    def world(self) -> int:
        """Number of ranks."""
        return self.nodes * self.gpus_per_node

    def rank(self, node: int, local: int) -> int:
        return node * self.gpus_per_node + local

    def node_of(self, rank: int) -> int:
        return rank // self.gpus_per_node

    def local_of(self, rank: int) -> int:
        return rank % self.gpus_per_node

    def node_ranks(self, node: int) -> list[int]:
        """The ranks of one node, in local order."""
        return [self.rank(node, local) for local in range(self.gpus_per_node)]

    def rail(self, local: int) -> list[int]:
        """The ranks with local index ``local`` on every node, in node order."""
        return [self.rank(node, local) for node in range(self.nodes)]

    def same_node(self, a: int, b: int) -> bool:
        return self.node_of(a) == self.node_of(b)
