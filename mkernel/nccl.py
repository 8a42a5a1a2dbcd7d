"""NCCL's collectives as NCCL runs them: the time of one call against its size, for the baselines.

The unfused baselines call NCCL. Declaring their collectives as rings of tasks in the IR
(:mod:`mkernel.builders._collectives`) checks the data path, but its timing is not NCCL's: NCCL
picks an algorithm and a protocol per size, spreads channels over every NIC of the node, and pays
per-step latencies that the IR ring does not have. This module models a call the way NCCL's own
tuner does (``src/graph/tuning.cc``: latency + bytes / bandwidth per algorithm and protocol, the
fastest wins), with the bandwidths taken from the traffic each algorithm puts on each link and
the terms NCCL's tuner cannot know (what a NIC achieves, how deep the pipeline is) calibrated on
published nccl-tests curves (``scenarios/nccl/published.toml``, docs/nccl-model.md).

Algorithms (``algo``): ``ring`` (every collective), ``tree`` (all-reduce across nodes: a chain in
each node, a double binary tree over nodes), ``nvls`` / ``nvls_tree`` (NVLink SHARP, all-reduce;
only with ``Fabric.nvls``: our testbeds run with it off, the published curves mostly with it on),
``p2p`` (alltoall: NCCL runs it as sends and receives). Protocols: ``LL`` (8-byte stores with a
flag: half the bandwidth, the least latency), ``LL128`` (120 of 128 bytes), ``Simple`` (full
bandwidth, a chunked pipeline with the most latency).

Bandwidth of an algorithm = 1 / max over its links of (bytes the link carries per message byte /
link rate): a GPU's NVLink port, its node's NICs together (ring and tree channels spread over
every NIC of the node), or its own NIC (alltoall cannot aggregate NICs, nccl-tests#267).
Sizes follow nccl-tests: all-reduce the buffer, all-gather the output, reduce-scatter the input,
alltoall the send buffer, per rank.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall")
PROTOCOLS = ("LL", "LL128", "Simple")

# NCCL's tuner constants (src/graph/tuning.cc, 2.2x: base latency, per-hop latency on NVLink and on
# the network, microseconds; index = protocol). Used for the latency side of each estimate.
BASE_US = {"ring": (6.6, 14.0, 8.4), "tree": (6.8, 14.0, 8.4), "nvls": (0, 0, 0), "nvls_tree": (0, 0, 0),
           "p2p": (0, 0, 8.4)}
NVLINK_HOP_US = {"ring": (0.6, 1.9, 3.4), "tree": (0.6, 1.25, 4.0), "nvls": (0, 0, 25.0), "nvls_tree": (0, 0, 25.0)}
NET_HOP_US = {"ring": (2.7, 4.0, 14.0), "tree": (5.0, 8.5, 14.0), "nvls": (0, 0, 18.0), "nvls_tree": (0, 0, 20.9)}
LL_MAX_BUS_GB_PER_S = {1: 141.0, 2: 39.0}  # Hopper on one node; Intel hosts on 2 (tuning.cc llMaxBws)
LL_RATE, LL128_RATE = 0.5, 0.92  # payload share of a line (LL: 4 data + 4 flag bytes; LL128: tuning.cc)
TREE_RATE = 0.92  # tuning.cc: a tree reaches 0.92 of its links' rate
RING_PLATEAU = 1.4  # tuning.cc: a multi-node ring all-reduce on Simple pays 1.4x its latency (sm80+)


@dataclass(frozen=True, slots=True)
class Terms:
    """What NCCL's tuner cannot know and nccl-tests curves show, per network (calibrated:
    docs/nccl-model.md gives each term's figure and fit)."""

    net_efficiency: float = 0.9  # busbw of a ring or tree over the node's NICs / their line rate
    a2a_efficiency: float = 0.9  # alltoall's rate over one GPU's own NICs / their line rate
    net_latency_scale: float = 1.0  # NCCL's network hop latencies x this (its tuner is tuned on IB)
    pipeline_bytes: float = 16 << 20  # a Simple pipeline's largest slice, all channels together
    fill_scale: float = 1.0  # the pipeline fill's hops x this (what slices wait at each hop)
    a2a_base_us: float = 0.0  # alltoall: the fixed cost of a call on top of NCCL's (its rounds' set-up)
    a2a_peer_us: float = 1.0  # alltoall: per remote peer, the cost of its exchange round
    nvls_efficiency: float = 0.74  # NVLS all-reduce algbw / NVLink rate (8 H100: 275 of 370 GB/s)
    nvls_hop_us: float = 25.0  # NVLS's latency in the node (NCCL's tuner: 25)


# IB: ConnectX-7 NDR through NCCL; EFA: SRD through aws-ofi-nccl; NVLink: one node (its pipeline and
# NVLS terms). Fitted by `python tools/studies/nccl_check.py --fit` on the fit = true curves of
# scenarios/nccl/published.toml (docs/nccl-model.md).
TERMS = {
    "ib": Terms(net_efficiency=0.875, a2a_efficiency=0.969),
    "efa": Terms(net_efficiency=0.781, a2a_efficiency=0.812, net_latency_scale=4.0, pipeline_bytes=12.9e6,
                 fill_scale=1.375, a2a_base_us=212.5, a2a_peer_us=3.75, nvls_efficiency=0.681),
    "nvlink": Terms(pipeline_bytes=10.4e6, fill_scale=2.5, nvls_efficiency=0.738, nvls_hop_us=37.3),
}


@dataclass(frozen=True, slots=True)
class Fabric:
    """What the model needs of a cluster. ``nvlink_gb_per_s``: one GPU's NVLink rate each way as
    NCCL's copies reach it (370 on an H100 or H200, nccl-tests#212; 368 measured on ours);
    ``nic_gb_per_s``: one GPU's NICs together, line rate each way."""

    nodes: int
    gpus_per_node: int
    nvlink_gb_per_s: float
    nic_gb_per_s: float
    network: str = "ib"  # a key of TERMS
    nvls: bool = False
    terms: Terms | None = None  # None: TERMS[network]
    nodes_per_leaf: int = 0  # > 0: leaf groups of this many nodes behind a spine (mkernel.cluster.FabricSpec)
    oversubscription: float = 1.0  # the spine carries a group's NIC rate / this

    def spine_share(self, crossing: float) -> float:
        """What the spine leaves of a NIC's rate when ``crossing`` of its traffic leaves the leaf
        group: each rail's spine plane carries the group's NICs of that rail at 1 / oversubscription."""
        p = self.nodes_per_leaf
        if not p or p >= self.nodes or crossing <= 0:
            return 1.0
        return min(1.0, 1.0 / (self.oversubscription * crossing))

    @property
    def world(self) -> int:
        return self.nodes * self.gpus_per_node

    def t(self) -> Terms:
        """The terms: the fabric's own, else its network's (one node: NVLink's)."""
        return self.terms or TERMS["nvlink" if self.nodes == 1 else self.network]


def fabric_of(cluster, nvls: bool = False) -> Fabric:
    """The fabric of a :class:`mkernel.cluster.Cluster` (EFA SRD -> "efa", RC and IBGDA -> "ib")."""
    return Fabric(cluster.nodes, cluster.gpus_per_node, cluster.nvlink.bw_gb_per_s, cluster.nic.gb_per_s,
                  "efa" if cluster.transport == "efa_srd" else "ib", nvls,
                  nodes_per_leaf=cluster.fabric.nodes_per_leaf, oversubscription=cluster.fabric.oversubscription)


@dataclass(frozen=True, slots=True)
class Estimate:
    """One call's predicted time, and how NCCL would run it."""

    coll: str
    nbytes: float
    time_us: float
    algo: str
    proto: str
    busbw_gb_per_s: float


def bus_factor(coll: str, world: int) -> float:
    """nccl-tests' busbw / algbw (doc/PERFORMANCE.md)."""
    if world < 2:
        return 1.0
    return 2.0 * (world - 1) / world if coll == "all_reduce" else (world - 1) / world


def algorithms(coll: str, f: Fabric) -> tuple[str, ...]:
    """The algorithms NCCL may use for ``coll`` on ``f`` (NVLS only when the fabric allows it)."""
    if coll == "alltoall":
        return ("p2p",)
    if coll != "all_reduce":
        return ("ring",)
    if f.nodes == 1:
        return ("ring", "nvls") if f.nvls else ("ring",)
    return ("ring", "tree", "nvls_tree") if f.nvls else ("ring", "tree")


def algbw(coll: str, algo: str, f: Fabric) -> float:
    """Simple-protocol algorithm bandwidth (GB/s): the slowest link for the traffic ``algo`` puts on it."""
    n, g, nodes, t = f.world, f.gpus_per_node, f.nodes, f.t()
    # rings and trees go node to node; one hop in nodes_per_leaf leaves the group
    nvl = f.nvlink_gb_per_s
    node_net = f.nic_gb_per_s * g * t.net_efficiency * f.spine_share(1.0 / max(1, f.nodes_per_leaf))
    if algo == "nvls":
        return t.nvls_efficiency * nvl
    if algo == "nvls_tree":  # NVLS in the node; between nodes half the buffer each way on 2 nodes, a tree beyond
        return min(t.nvls_efficiency * nvl, node_net / (0.5 if nodes == 2 else 2.0))
    if algo == "p2p":
        remote, local = (n - g) / n, (g - 1) / n
        p = f.nodes_per_leaf or nodes
        nic = f.nic_gb_per_s * t.a2a_efficiency * f.spine_share((nodes - min(p, nodes)) / max(1, nodes - 1))
        return 1.0 / max(local / nvl, remote / nic if remote else 0.0)
    if algo == "tree":  # each GPU of a chain sends the buffer up and down (both trees); a node sends it
        # once on 2 nodes, twice beyond (double binary tree); NCCL's tuner counts 0.92 of that
        return TREE_RATE / max(2.0 / nvl if g > 1 else 0.0, (1.0 if nodes == 2 else 2.0) / node_net)
    per_link = bus_factor(coll, n)  # ring: every link carries busbw-factor bytes per message byte
    if nodes == 1:
        return nvl / per_link
    return 1.0 / max(per_link * (g - 1) / g / nvl if g > 1 else 0.0, per_link / node_net)


def _steps(coll: str, algo: str, f: Fabric) -> tuple[int, int]:
    """(hops over NVLink, hops over the network) of one byte's path: the latency side."""
    n, g, nodes = f.world, f.gpus_per_node, f.nodes
    if algo == "ring":
        total = 2 * (n - 1) if coll == "all_reduce" else n - 1
        net = 0 if nodes == 1 else (2 * (nodes - 1) if coll == "all_reduce" else nodes - 1)
        return total - net, net
    if algo == "tree":
        return 2 * (g - 1), 2 * max(1, math.ceil(math.log2(nodes)))
    if algo == "nvls_tree":
        return 1, 2 * max(1, math.ceil(math.log2(nodes)))
    return 1, 0


def latency_us(coll: str, algo: str, proto: str, f: Fabric) -> float:
    """NCCL's tuner latency, its network hops scaled by ``Terms.net_latency_scale``."""
    p = PROTOCOLS.index(proto)
    t = f.t()
    if algo == "p2p":  # a round per remote peer; local peers are NVLink copies in the same round
        return (BASE_US["p2p"][2] + NVLINK_HOP_US["ring"][2] + (t.a2a_base_us if f.nodes > 1 else 0.0)
                + (f.world - f.gpus_per_node) * t.a2a_peer_us)
    intra, net = NVLINK_HOP_US[algo][p], NET_HOP_US[algo][p] * t.net_latency_scale
    if algo == "nvls":
        intra = t.nvls_hop_us
    if f.nodes > 1 and algo == "ring":  # every ring step also launches a network operation somewhere
        intra = max(intra, 3.0 if proto == "Simple" else 1.0)
    hops_nvl, hops_net = _steps(coll, algo, f)
    lat = BASE_US[algo][p] + hops_nvl * intra + hops_net * net
    if algo == "ring" and proto == "Simple" and f.nodes > 1 and coll == "all_reduce":
        lat *= RING_PLATEAU
    return lat


def _fill_us(coll: str, algo: str, proto: str, nbytes: float, bw: float, f: Fabric) -> float:
    """A pipeline's fill: the first slice crosses every store-and-forward hop before the links
    stream. NCCL slices each channel's share (down to 1/(2 x ranks) of it for a ring), up to
    ``Terms.pipeline_bytes`` over all channels: time = hops x slice / per-link rate. Simple stores
    and forwards at every hop; LL and LL128 stream through NVLink line by line, and only a network
    hop (the proxy posts whole buffer steps) waits for its slice."""
    if algo == "p2p":
        return 0.0
    nvl_hops, net_hops = _steps(coll, algo, f)
    hops = max(1, nvl_hops + net_hops - 1) if proto == "Simple" else net_hops
    if not hops:
        return 0.0
    per_link = bw * (bus_factor(coll, f.world) if algo == "ring" else 1.0)
    depth = 2 * f.world if algo == "ring" else 8
    slice_bytes = min(f.t().pipeline_bytes, nbytes / depth)
    return hops * f.t().fill_scale * slice_bytes / (per_link * 1e3)


def estimate_algo(coll: str, nbytes: float, f: Fabric, algo: str, proto: str) -> Estimate:
    """The time of ``coll`` on ``nbytes`` with a given algorithm and protocol."""
    if coll not in COLLECTIVES:
        raise ValueError(f"unknown collective {coll!r}; allowed: {', '.join(COLLECTIVES)}")
    if f.world < 2 or nbytes <= 0:
        return Estimate(coll, nbytes, 0.0, algo, proto, 0.0)
    bw = algbw(coll, algo, f)
    if proto == "LL128":
        bw *= LL128_RATE
    elif proto == "LL":
        cap = LL_MAX_BUS_GB_PER_S[min(f.nodes, 2)] / (bus_factor(coll, f.world) if algo == "ring" else 1.0)
        bw = min(bw * LL_RATE, cap)
    time = latency_us(coll, algo, proto, f) + nbytes / (bw * 1e3) + _fill_us(coll, algo, proto, nbytes, bw, f)
    return Estimate(coll, nbytes, time, algo, proto, nbytes / (time * 1e3) * bus_factor(coll, f.world))


def estimate(coll: str, nbytes: float, f: Fabric) -> Estimate:
    """The time of ``coll`` on ``nbytes`` (bytes per rank, nccl-tests' sizes) as NCCL would run it:
    the fastest of the algorithms and protocols it may use (NCCL's tuner picks by the same kind of
    model; alltoall runs on Simple)."""
    protos = ("Simple",) if coll == "alltoall" else PROTOCOLS
    best = None
    for algo in algorithms(coll, f):
        for proto in protos if algo in ("ring", "tree") else ("Simple",):
            e = estimate_algo(coll, nbytes, f, algo, proto)
            if best is None or e.time_us < best.time_us:
                best = e
    return best


def with_terms(f: Fabric, **changes) -> Fabric:
    """``f`` with some of its network's terms changed (for fitting and what-ifs)."""
    return replace(f, terms=replace(f.t(), **changes))
