"""The machine a schedule runs on: nodes x GPUs, and the specs of each tier.

Ranks are numbered ``rank = node * gpus_per_node + local``. Rail peers are the ranks with the same
local index on different nodes; in a rail-optimized fabric only they talk across the network.

Defaults are H200 figures. Where a figure was measured on our machine it says so; the rest are
datasheet values or estimates until `mkernel calibrate` (a hardware profile) replaces them.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

TRANSPORTS = ("ib_rc", "efa_srd", "ibgda")
# what a user chooses for the GPU backend (mkernel.hw.runtime.transports: what each needs, the one auto picks);
# named here, beside the simulator's, so the command line lists them without loading the hw runtime
HW_TRANSPORTS = ("auto", "loopback", "verbs_rc", "verbs_srd", "ofi")
# How a receiver learns that a chunk has landed ("auto" picks the safe one for the transport):
#   flag  - the sender posts a flag write after the data (safe on ib_rc and ibgda, which deliver in
#           order; on efa_srd the flag may overtake the data: a protocol bug kept for studies)
#   imm   - write-with-immediate; the receiving proxy sets the flag on the receive completion
#   fence - the sender's proxy waits until every write to that peer has completed, then posts the flag
NOTIFY_MODES = ("auto", "flag", "imm", "fence")
# How fast the fused kernel's compute roles run (``Cluster.kernels``):
#   measured  - our kernels, as calibrated: their fitted share of cuBLAS and SDPA, per-call and per-tile costs
#   reference - every compute role at library speed: GEMM tiles at cuBLAS's rate, attention tiles at
#               torch's default SDPA (reference_attention_efficiency), no per-tile cost; what the paper's
#               kernels reach. Baselines' attention runs at SDPA's default speed too. The kernel's fixed
#               cost per call and its communication roles stay as measured: they are not compute.
KERNEL_PROFILES = ("measured", "reference")
# Baselines whose attention is FlashAttention-2 (the calibrated flash SDPA rate, ``attention_efficiency``)
# in either profile: the paper's ring-attention baseline (mkernel.builders.ring_attention.PAPER_BASELINE)
FA2_VARIANTS = ("nccl_hier_ag_kv+fa2",)


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One GPU. ``matmul_tflops`` is the sustained bf16 rate of a large GEMM on all SMs."""

    name: str = "H200"
    sms: int = 132
    matmul_tflops: float = 798.0  # measured: torch.matmul bf16 8192^3 on the lent H200
    hbm_gb_per_s: float = 4260.0  # measured: device-to-device copy, bytes read + written
    attention_efficiency: float = 0.65  # estimate: flash attention's share of the matmul rate (softmax in between)
    # The fused kernel's own tiles against the library kernels the baselines call (cuBLAS, flash
    # attention): 1.0 assumes parity; `mkernel calibrate` measures them.
    fused_gemm_efficiency: float = 1.0
    fused_attention_efficiency: float = 1.0
    # The fused kernel is an interpreter: each call pays an entry and exit (barrier, epoch, tables),
    # each compute tile (GEMM, attention) a fixed cost on top of its FLOPs (pipeline fill, epilogue,
    # its task row). Fitted on world-1 runs; 0 = free.
    fused_call_us: float = 0.0
    fused_tile_us: float = 0.0
    # Each communication task of the fused kernel that touches a peer (copy, reduce, gather) pays a
    # fixed cost on top of its bytes: peer loads stall the SM for their round trip, and its flags are
    # system-scope releases. Fitted on real NVLink runs (2 GPUs); 0 = free.
    fused_peer_task_us: float = 0.0
    # It moves its bytes in steps of fused_step_rows x fused_step_cols elements per region (a
    # gather: its indexed rows), and each step waits for its loads' round trip before the next,
    # fused_peer_step_us when the task touches a peer, fused_local_step_us when it stays in its
    # own HBM: one step is what an SM has in flight (hw.knobs.HwKnobs.copy_rows x CC), so a 16-row gather
    # moves a quarter of the bytes per round trip. Fitted with fused_peer_task_us on real NVLink
    # runs; 0 = free.
    fused_peer_step_us: float = 0.0
    fused_local_step_us: float = 0.0
    # One SM's peer rate in the fused kernel while its step loads stream (GB/s; 0 = the NVLink
    # spec's sm_copy_gb_per_s, which calibrate measures with peer stores and the baselines use).
    fused_sm_copy_gb_per_s: float = 0.0
    # torch's default SDPA (cuDNN on the H200) against matmul_tflops: the reference profile's attention rate
    reference_attention_efficiency: float = 0.85  # estimate until calibrated (h200-facts: 676 of 798 TFLOPS)
    fused_step_rows: int = 64
    fused_step_cols: int = 256
    # One SM's matmul rate (TFLOPS) when few SMs compute: clocks and shared HBM/L2 cap the whole GPU
    # at matmul_tflops, so each of n busy SMs runs at min(this, matmul_tflops / n). 0 = no headroom.
    sm_matmul_tflops: float = 0.0
    sm_stream_gb_per_s: float = 100.0  # estimate: local HBM traffic one communication SM can drive
    l2_operand_miss: float = 0.1  # estimate: share of a GEMM tile's A/B reads that miss L2 and reach HBM
    full_tile_elems: int = 128 * 256  # tiles this large or larger reach the full per-SM matmul rate
    memory_gib: float = 139.0


@dataclass(frozen=True, slots=True)
class NvlinkSpec:
    """The NVLink/NVSwitch port of one GPU: bandwidth per direction, and what one SM can drive.

    A transfer of b bytes costs as if it were ``b + half_efficiency_bytes``: at that size a message
    reaches half the link rate (a standard latency-bandwidth efficiency curve).
    """

    bw_gb_per_s: float = 450.0  # H200 NVLink 4, per direction
    latency_us: float = 1.0  # estimate: peer store visible at the peer
    sm_copy_gb_per_s: float = 30.0  # estimate: one SM's peer copy rate; ~16 SMs saturate a port
    half_efficiency_bytes: float = 4096.0  # estimate: message size at half efficiency


@dataclass(frozen=True, slots=True)
class NicSpec:
    """The NICs of one GPU (rail). ``count`` NICs of ``gbit_per_s`` each serve that GPU."""

    count: int = 1
    gbit_per_s: float = 400.0
    latency_us: float = 2.0  # estimate: RDMA write, one switch hop
    per_message_us: float = 0.5  # estimate: NIC work per work request
    srd_jitter_us: float = 2.0  # efa_srd only: mean of the exponential extra delay of each message
    ibgda_post_us: float = 1.5  # ibgda only: system-scope fence + doorbell written by the GPU itself

    @property
    def gb_per_s(self) -> float:
        """Aggregate bandwidth of this GPU's NICs in GB/s (one direction)."""
        return self.count * self.gbit_per_s / 8.0


@dataclass(frozen=True, slots=True)
class FabricSpec:
    """The switch fabric between nodes. By default it is non-blocking (a rail-optimised fabric:
    each rail's leaf reaches every node at full NIC rate). With ``nodes_per_leaf`` > 0, nodes sit in
    leaf groups of that many; traffic between groups crosses the spine, whose uplinks carry the
    group's NIC bandwidth divided by ``oversubscription`` (2.0: a 2:1 oversubscribed spine)."""

    nodes_per_leaf: int = 0
    oversubscription: float = 1.0

    def group_of(self, node: int) -> int:
        return node // self.nodes_per_leaf if self.nodes_per_leaf else 0

    def crossing_share(self, nodes: int) -> float:
        """The share of a NIC's rate its traffic to other leaf groups gets when every node sends to
        every other alike: (nodes - nodes_per_leaf) / (nodes - 1) of it crosses the spine, whose plane
        per rail carries the group's NICs of that rail at 1 / oversubscription of their rate."""
        p = self.nodes_per_leaf
        if not p or p >= nodes:
            return 1.0
        return spine_share(self.oversubscription, (nodes - p) / (nodes - 1))


def spine_share(oversubscription: float, crossing: float) -> float:
    """What a spine leaves of a NIC's rate when ``crossing`` of its traffic leaves its leaf group:
    each rail's spine plane carries the group's NICs of that rail at 1 / ``oversubscription`` of
    their rate. Written once for the MoE builder's send rule and the NCCL model."""
    return 1.0 if crossing <= 0 else min(1.0, 1.0 / (oversubscription * crossing))


@dataclass(frozen=True, slots=True)
class ProxySpec:
    """The host proxy that turns GPU commands into RDMA work requests."""

    gpu_enqueue_us: float = 0.5  # a send block writes a 48-byte command to pinned host memory
    poll_us: float = 0.5  # the proxy polls the ring at this interval
    per_command_us: float = 0.3  # host cost to build one work request
    doorbell_us: float = 0.2  # host cost to submit one batch to the NIC
    batch: int = 8  # at most this many commands of one connection per submission
    batch_window_us: float = 1.0  # how long the proxy waits for a partial batch to fill
    queue_depth: int = 1024  # ring entries: the credits a GPU can hold outstanding
    max_outstanding: int = 64  # RDMA writes in flight per proxy before it waits for completions


@dataclass(frozen=True, slots=True)
class Cluster:
    """Nodes x GPUs per node, with one spec per tier. Immutable; build variants with ``replace``."""

    name: str
    nodes: int
    gpus_per_node: int
    transport: str = "ib_rc"
    notify: str = "auto"
    gpu: GpuSpec = field(default_factory=GpuSpec)
    nvlink: NvlinkSpec = field(default_factory=NvlinkSpec)
    nic: NicSpec = field(default_factory=NicSpec)
    proxy: ProxySpec = field(default_factory=ProxySpec)
    fabric: FabricSpec = field(default_factory=FabricSpec)
    launch_us: float = 4.0  # estimate: gap between two stream-ordered kernel launches
    kernels: str = "measured"  # the kernel profile: KERNEL_PROFILES

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.gpus_per_node < 1:
            raise ValueError(f"cluster needs nodes >= 1 and gpus_per_node >= 1, got {self.nodes}x{self.gpus_per_node}")
        if self.transport not in TRANSPORTS:
            raise ValueError(f"transport {self.transport!r} is not one of {TRANSPORTS}")
        if self.notify not in NOTIFY_MODES:
            raise ValueError(f"notify {self.notify!r} is not one of {NOTIFY_MODES}")
        if self.kernels not in KERNEL_PROFILES:
            raise ValueError(f"kernels {self.kernels!r} is not one of {KERNEL_PROFILES}")

    @property
    def notify_mode(self) -> str:
        """The arrival notification actually used: "auto" resolved for the transport."""
        if self.notify != "auto":
            return self.notify
        return "imm" if self.transport == "efa_srd" else "flag"

    @property
    def fold_nodes(self) -> int:
        """How many nodes a collapsed run simulates (0: none exact). One, unless the fabric's leaf
        groups split the nodes: then one whole group, and only when groups are all full."""
        p = self.fabric.nodes_per_leaf
        if not p or p >= self.nodes:
            return 1
        return p if self.nodes % p == 0 else 0

    @property
    def world(self) -> int:
        """Number of ranks."""
        return self.nodes * self.gpus_per_node

    @property
    def sm_copy_gb_per_s(self) -> float:
        """One SM's NVLink copy rate: the fused kernel's own where the profile has it (a fused
        schedule's cluster; :meth:`for_variant` drops it for baselines), else the NVLink spec's."""
        return self.gpu.fused_sm_copy_gb_per_s or self.nvlink.sm_copy_gb_per_s

    def with_sms(self, sms: int) -> Cluster:
        """This cluster with ``sms`` SMs per GPU: what a rank may use when ranks share a GPU."""
        return dataclasses.replace(self, gpu=dataclasses.replace(self.gpu, sms=sms))

    def for_variant(self, variant: str) -> Cluster:
        """The rates a schedule of ``variant`` runs at: the fused kernel's GEMM and attention tiles
        at its measured share of the library kernels' rates, with its per-call and per-task
        interpreter costs ("kernel": our stand-alone kernels, the same rates without them);
        baselines at the library rates, without them. The reference kernel profile first puts every
        compute role at library speed (:meth:`at_reference`)."""
        if self.kernels == "reference":
            ref = self.at_reference()
            if variant in FA2_VARIANTS:  # the measured profile's baseline attention: flash SDPA's rate
                ref = dataclasses.replace(ref, gpu=dataclasses.replace(
                    ref.gpu, attention_efficiency=self.gpu.attention_efficiency))
            return ref.for_variant(variant)
        g = self.gpu
        if variant not in ("fused", "kernel"):  # sm_matmul_tflops is measured on the fused kernel's GEMM
            return dataclasses.replace(self, gpu=dataclasses.replace(
                g, sm_matmul_tflops=g.sm_matmul_tflops / g.fused_gemm_efficiency, fused_call_us=0.0,
                fused_tile_us=0.0, fused_peer_task_us=0.0, fused_peer_step_us=0.0, fused_local_step_us=0.0,
                fused_sm_copy_gb_per_s=0.0))
        if variant == "kernel":  # stand-alone kernels (the self-tests' put loop; calibrate's GEMM before 2026-12-04)
            g = dataclasses.replace(g, fused_call_us=0.0, fused_tile_us=0.0, fused_peer_task_us=0.0,
                                    fused_peer_step_us=0.0, fused_local_step_us=0.0, fused_sm_copy_gb_per_s=0.0)
        return dataclasses.replace(self, gpu=dataclasses.replace(
            g, matmul_tflops=g.matmul_tflops * g.fused_gemm_efficiency, fused_gemm_efficiency=1.0,
            attention_efficiency=g.attention_efficiency * g.fused_attention_efficiency / g.fused_gemm_efficiency,
            fused_attention_efficiency=1.0))

    def at_reference(self) -> Cluster:
        """This cluster with the reference kernel profile's compute rates (KERNEL_PROFILES), as a
        measured profile: the fused GEMM and attention tiles at the libraries' rates, attention at
        torch's default SDPA speed in every variant, no per-tile cost. The fixed cost per call and the
        communication roles' costs stay as measured: the profile is about compute."""
        g = self.gpu
        return dataclasses.replace(self, kernels="measured", gpu=dataclasses.replace(
            g, fused_gemm_efficiency=1.0, fused_attention_efficiency=1.0,
            attention_efficiency=g.reference_attention_efficiency, fused_tile_us=0.0,
            sm_matmul_tflops=g.sm_matmul_tflops / g.fused_gemm_efficiency))

    def rank(self, node: int, local: int) -> int:
        return node * self.gpus_per_node + local

    def node_of(self, rank: int) -> int:
        return rank // self.gpus_per_node

    def local_of(self, rank: int) -> int:
        return rank % self.gpus_per_node

    def relative(self, rank: int, seen_from: int) -> int:
        """``rank`` numbered from ``seen_from``'s node: the same on every node, so signal indices
        built from it keep a schedule node-symmetric (see ScheduleBuilder.node0_only)."""
        return ((self.node_of(rank) - self.node_of(seen_from)) % self.nodes) * self.gpus_per_node + self.local_of(rank)

    def node_ranks(self, node: int) -> list[int]:
        """The ranks of one node, in local order."""
        return [self.rank(node, local) for local in range(self.gpus_per_node)]

    def node_ranks_from(self, rank: int) -> list[int]:
        """The ranks of ``rank``'s node from ``rank`` on (wrapping): the order in which peers are served
        so that at each step every rank of the node writes into a different one (one writer per
        NVLink ingress), as an all-to-all schedules its peers."""
        node, local, g = self.node_of(rank), self.local_of(rank), self.gpus_per_node
        return [self.rank(node, (local + i) % g) for i in range(g)]

    def rail(self, local: int) -> list[int]:
        """The ranks with local index ``local`` on every node, in node order."""
        return [self.rank(node, local) for node in range(self.nodes)]

