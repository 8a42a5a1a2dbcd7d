"""NCCL's collectives as NCCL runs them: the time of one call against its size, for the baselines.

The unfused baselines call NCCL. Declaring their collectives as rings of tasks in the IR
(:mod:`mkernel.builders._collectives`) checks the data path, but its timing is not NCCL's. This
module times a call in two steps (docs/nccl-model.md gives every source):

1. **What NCCL runs** (:mod:`mkernel.nccl_tuner`): the algorithm and protocol NCCL's own cost table
   picks, fed what NCCL is fed (its topology graph, the network plugin's latency, the CPU vendor),
   or aws-ofi-nccl's region tuner beyond 2 nodes on AWS.
2. **How long that takes**, from NCCL's data movement rather than its estimate:
   - a ring is one channel's schedule played out (:func:`_ring_steps`): each rank's share cut in NCCL's
     chunks and slices (``src/enqueue.cc``, ``prims_simple.h``, buffers from ``src/init.cc``), every
     slice waiting for its predecessor's arrival, its link, and a free slot of the receiver's 8-step
     FIFO, freed once the receiver has copied that slice out and, over the network, known to the sender
     when the receive posted into it has sent its control message back (``net.cc``, aws-ofi-nccl's RDMA
     ``send``); NVLink carries LL128 lines through as they land, Simple and every network hop store and
     forward whole slices (one network send per slice, ``net.cc``), an LL step on NVLink costs its
     latency plus its bytes at LL's rate (NCCL's own LL cost); a network hop costs NCCL's network
     latency plus a fitted share of the plugin's reported one, once (no GPU-Direct flush on Hopper:
     ``paths.cc``), and per message what the proxy and NIC add; a step's floor is ``getNetOverhead``;
   - a tree is NCCL's latency along its path (its estimate: the fitted hop latency twice on Simple,
     for the flush) plus its bytes at the tree's rate, with NCCL's per-channel ceilings, its measured
     mid-size correction, and on LL / LL128 the 30% of a channel's warps its broadcast runs on
     (``runTreeSplit``, ``src/device/all_reduce.h``);
   - NVLS keeps its calibrated bandwidth model; alltoall is bytes at a calibrated rate plus a cost per
     remote peer and per network chunk of each peer's message (NCCL's P2P chunk rule, ``addP2pToPlan``).
   Rates per channel: a link's rate over NCCL's channels, capped by NCCL's per-channel protocol
   ceilings (LL128 36.7 GB/s per graph channel on Hopper; LL's ``llMaxBws``).

Sizes follow nccl-tests: all-reduce the buffer, all-gather the output, reduce-scatter the input,
alltoall the send buffer, per rank.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from . import nccl_tuner as tuner
from .cluster import spine_share as cluster_spine_share

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall")
PROTOCOLS = tuner.PROTOCOLS
NCCL_STEPS = 8  # FIFO slots per connection (src/include/device.h)
LL_BUFFER = 8 * 512 * NCCL_STEPS * 16  # DEFAULT_LL_BUFFSIZE: lines/thread x threads x steps x 16 B
LL128_BUFFER = 120 * 640 * NCCL_STEPS * 8  # DEFAULT_LL128_BUFFSIZE
PAYLOAD = {"LL": 0.5, "LL128": 120 / 128, "Simple": 1.0}  # data share of the bytes a protocol moves
SIMPLE_SLICE_STEPS, SIMPLE_CHUNK_STEPS = 2, 4  # ALL{REDUCE,GATHER}/REDUCESCATTER_{SLICE,CHUNK}STEPS
# A tree's LL / LL128 channel gives 70% of its warps to the reduction up and 30% to the broadcast down
# (src/device/all_reduce.h, runTreeSplit); the broadcast's share of the protocol's per-channel ceiling binds.
TREE_BCAST_SHARE = 0.3


PLATFORMS = tuner.PLATFORMS  # what NCCL reads off each host (mkernel.nccl_tuner.Platform)


@dataclass(frozen=True, slots=True)
class Terms:
    """What NCCL's sources cannot say and nccl-tests curves show, per network (calibrated:
    docs/nccl-model.md gives each term's fit and the curves held out from it)."""

    net_efficiency: float = 0.9  # a ring's Simple rate over the node's NICs / their line rate
    net_message_us: float = 0.0  # per network message (one slice), the proxy's serial cost beyond its bytes
    net_hop_share: float = 0.0  # a network hop's latency beyond NCCL's / the plugin's reported latency
    a2a_efficiency: float = 0.9  # alltoall's rate over one GPU's own NICs / their line rate
    a2a_base_us: float = 0.0  # alltoall: the fixed cost of a call on top of NCCL's (its rounds' set-up)
    a2a_peer_us: float = 1.0  # alltoall: per remote peer, the cost of its exchange round
    a2a_message_us: float = 0.0  # alltoall: per network chunk of a remote peer's message, the proxy's cost
    nvls_efficiency: float = 0.74  # NVLS all-reduce algbw / NVLink rate (8 H100: 275 of 370 GB/s)
    nvls_hop_us: float = 25.0  # NVLS's latency in the node (NCCL's tuner: 25)


# IB: ConnectX-7 NDR through NCCL; EFA: SRD through aws-ofi-nccl; NVLink: one node (its NVLS terms).
# Fitted by `python tools/studies/nccl_check.py --fit` on the fit = true curves of
# scenarios/nccl/published.toml (docs/nccl-model.md). NVLS reduces in the node's NVSwitch, whatever the
# NIC: no IB curve with NVLS is fitted, so IB takes the rate fitted on one node (p5-ar-1n), not the default.
_NVLINK = Terms(nvls_efficiency=0.644, nvls_hop_us=40.9)
TERMS = {
    "ib": Terms(net_efficiency=0.828, a2a_efficiency=0.969, nvls_efficiency=_NVLINK.nvls_efficiency),
    "efa": Terms(net_efficiency=0.828, net_message_us=2.5, net_hop_share=0.5, a2a_efficiency=0.984,
                 a2a_base_us=175.0, a2a_peer_us=2.0, a2a_message_us=2.0, nvls_efficiency=_NVLINK.nvls_efficiency),
    "nvlink": _NVLINK,
}


@dataclass(frozen=True, slots=True)
class Fabric:
    """What the model needs of a cluster. ``nvlink_gb_per_s``: one GPU's NVLink rate each way as
    NCCL's copies reach it (370 on an H100 or H200, nccl-tests#212; 368 measured on ours);
    ``nic_gb_per_s``: one GPU's NICs together, line rate each way; ``platform``: a key of
    :data:`PLATFORMS` (AWS instance family, or "" for NCCL's defaults); ``ll128``: whether NCCL may run
    LL128 (on Hopper it does not where a GPU reaches its NIC beyond PXN, ``tuning.cc``)."""

    nodes: int
    gpus_per_node: int
    nvlink_gb_per_s: float
    nic_gb_per_s: float
    network: str = "ib"  # a key of TERMS
    nvls: bool = False
    terms: Terms | None = None  # None: TERMS[network]
    nodes_per_leaf: int = 0  # > 0: leaf groups of this many nodes behind a spine (mkernel.cluster.FabricSpec)
    oversubscription: float = 1.0  # the spine carries a group's NIC rate / this
    platform: str = ""
    ll128: bool = True

    def spine_share(self, crossing: float) -> float:
        """What the spine leaves of a NIC's rate when ``crossing`` of its traffic leaves the leaf
        group: each rail's spine plane carries the group's NICs of that rail at 1 / oversubscription."""
        p = self.nodes_per_leaf
        return 1.0 if not p or p >= self.nodes else cluster_spine_share(self.oversubscription, crossing)

    @property
    def world(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def cpu(self) -> str:
        return PLATFORMS[self.platform].cpu

    @property
    def plugin_latency_us(self) -> float:
        return PLATFORMS[self.platform].plugin_latency_us if self.nodes > 1 else 0.0

    def t(self) -> Terms:
        """The terms: the fabric's own, else its network's (one node: NVLink's)."""
        return self.terms or TERMS["nvlink" if self.nodes == 1 else self.network]

    @property
    def net_hop_us(self) -> float:
        """A network hop's latency beyond NCCL's constant (us; a ring pays it once, and once for the slot's
        credit): the terms' share of the plugin's reported latency (NCCL's estimate adds all of it)."""
        share, latency = self.t().net_hop_share, self.plugin_latency_us
        if share and not latency and self.nodes > 1:  # (a hop of 0 would pass unsaid)
            raise ValueError(f"the {self.network} hop is a share of the plugin's latency, which platform "
                             f"{self.platform!r} does not report; one of: {', '.join(p for p in PLATFORMS if p)}")
        return share * latency


def fabric_of(cluster, nvls: bool = False) -> Fabric:
    """The fabric of a :class:`mkernel.cluster.Cluster` (EFA SRD -> "efa" on a p5en-like host, the
    paper's EFA testbed; RC and IBGDA -> "ib")."""
    efa = cluster.transport == "efa_srd"
    return Fabric(cluster.nodes, cluster.gpus_per_node, cluster.nvlink.bw_gb_per_s, cluster.nic.gb_per_s,
                  "efa" if efa else "ib", nvls, nodes_per_leaf=cluster.fabric.nodes_per_leaf,
                  oversubscription=cluster.fabric.oversubscription, platform="p5en" if efa else "")


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
    return 1.0 if world < 2 else (2.0 if coll == "all_reduce" else 1.0) * (world - 1) / world


def algorithms(coll: str, f: Fabric) -> tuple[str, ...]:
    """The algorithms NCCL may use for ``coll`` on ``f`` (NVLS only when the fabric allows it)."""
    if coll == "alltoall":
        return ("p2p",)
    return tuple(dict.fromkeys(a for a, _ in tuner.candidates(coll, f)))


def channels(f: Fabric) -> int:
    """The channels NCCL runs: its graph's, doubled (``ncclTopoPostset`` duplicates every ring)."""
    return 2 * tuner.graph(f)[0]


def _node_net(f: Fabric, t: Terms) -> float:
    """A node's NIC rate a ring or tree reaches (GB/s): line rate x efficiency x the spine's share
    (one hop in nodes_per_leaf leaves the leaf group)."""
    return (f.nic_gb_per_s * f.gpus_per_node * t.net_efficiency
            * f.spine_share(1.0 / max(1, f.nodes_per_leaf)))


def _cap(proto: str, f: Fabric) -> float:
    """NCCL's ceiling on a protocol's bus bandwidth (GB/s, all channels): LL128 36.7 per graph
    channel on Hopper, LL ``llMaxBws``; Simple none."""
    if proto == "LL128":
        return tuner.graph(f)[0] * tuner.RING_LL128_PER_CHANNEL
    return tuner.ll_max_bus(f) if proto == "LL" else math.inf


def _ring_slices(c: float, proto: str, f: Fabric) -> tuple[int, int, int]:
    """How NCCL cuts one channel's share of one rank's chunk (``c`` bytes): (loops, slices per loop,
    FIFO slots in slices). Simple: chunks of 4 steps in 2 slices (a chunk smaller than that still
    in 2 slices, down to 1/32 of one); LL and LL128: one step per chunk."""
    if proto == "Simple":
        step = PLATFORMS[f.platform].simple_buffer / NCCL_STEPS
        loops = max(1, math.ceil(c / (step * SIMPLE_CHUNK_STEPS)))
        per = 2 if c / loops / 2 >= step * SIMPLE_SLICE_STEPS / 32 else 1
        return loops, per, NCCL_STEPS // SIMPLE_SLICE_STEPS
    step = LL128_BUFFER / NCCL_STEPS * PAYLOAD["LL128"] if proto == "LL128" else LL_BUFFER / NCCL_STEPS / 2
    return max(1, math.ceil(c / step)), 1, NCCL_STEPS


def _ring(coll: str, nbytes: float, f: Fabric, proto: str) -> float:
    """A ring collective's time (us) on ``f`` with ``proto``: one channel's schedule, played out."""
    n, g, t = f.world, f.gpus_per_node, f.t()
    nch = channels(f)
    steps = 2 * (n - 1) if coll == "all_reduce" else n - 1
    # a small call runs on fewer channels, each at its own rate (a channel's share of the links, below)
    c = nbytes / (n * tuner.call_channels("ring", proto, nbytes, f, nch))
    loops, per, depth = _ring_slices(c, proto, f)
    piece = c / (loops * per)
    p = PROTOCOLS.index(proto)
    cap = _cap(proto, f)
    # bytes per us per channel on NVLink: LL at its one-node ceiling (a multi-node ring's LL ceiling is
    # its network's, which the network hop below keeps)
    nvl_cap = tuner.LL_MAX_BUS_ONE_NODE if proto == "LL" else cap
    nvl = min(f.nvlink_gb_per_s * PAYLOAD[proto], nvl_cap) * 1e3 / nch
    lat_nvl = tuner.NVLINK_HOP_US["ring"][p]
    if f.nodes > 1:  # every ring step launches a network operation somewhere (tuning.cc getNetOverhead)
        overhead = 2.0 if f.cpu == "amd" else 1.0
        lat_nvl = max(lat_nvl, overhead * (3 if proto == "Simple" else 1))
        net = min(_node_net(f, t) * PAYLOAD[proto], cap) * 1e3 / nch
        # a network hop's latency, once: Hopper needs no GPU-Direct flush (paths.cc ncclTopoNeedFlush; aws-ofi-nccl
        # sets NCCL_NET_FORCE_FLUSH=0), and a freed slot's credit crosses the same hop back to the sender
        lat_net = tuner.NET_HOP_US["ring"][p] + f.net_hop_us
        net_link = (piece / net + t.net_message_us, lat_net, lat_net)
    else:
        net_link = None
    run = _ring_steps(steps, loops, per, depth, g, (piece / nvl, lat_nvl, 0.0), net_link,
                      through=proto == "LL128", final=piece / nvl)  # LL: step by step on NVLink too
    return tuner.BASE_US["ring"][p] + run


def _ring_steps(steps: int, loops: int, per: int, depth: int, g: int, nvl: tuple, net: tuple | None,
                through: bool, final: float) -> float:
    """The last arrival of one channel's ring (us). Ranks 0..g-1 of one node stand for every node
    (all nodes run the same schedule): rank r sends to r+1, rank g-1 over the network (``net``:
    (busy us per slice, latency, credit)) when there is one, else over NVLink (``nvl``). A slice
    leaves when it has arrived, its link is free, and the receiver has released the FIFO slot it goes
    to: the slot of the slice ``depth`` before it, released when the receiver's copy of that slice
    out of its FIFO (forwarding it, or the final copy) is done, and known to the sender ``credit`` us
    later (over the network, the receiver's control message crossing back); ``through``: NVLink hops
    forward lines as they land; the receiver's last copy out of its FIFO costs ``final`` per slice."""
    free = [0.0] * g
    sent = 0  # slices each rank has sent (every rank sends one per step and slice)
    freed: list[list[float]] = [[] for _ in range(g)]  # when rank r freed its k-th received slice's slot
    end = done = 0.0
    links = [net if (net and r == g - 1) else nvl for r in range(g)]
    for _ in range(loops):
        arrived = [[0.0] * g for _ in range(per)]
        for step in range(steps):
            nxt = [[0.0] * g for _ in range(per)]
            for q in range(per):
                for r in range(g):
                    busy, lat, credit = links[r]
                    start = max(arrived[q][r] if step else 0.0, free[r])
                    if sent >= depth:  # the receiver's slot of my slice `depth` back
                        start = max(start, freed[(r + 1) % g][sent - depth] + credit)
                    free[r] = start + busy
                    if step:  # forwarding the slice it received a step ago releases that slot
                        freed[r].append(start + busy)
                    cut = through and links[r] is nvl
                    nxt[q][(r + 1) % g] = start + lat + (0.0 if cut else busy)
                    end = max(end, start + lat + busy)
                sent += 1
            arrived = nxt
        for q in range(per):
            done = max(done, max(arrived[q])) + final
            for r in range(g):  # the last step's slices leave the FIFO by the final copy
                freed[r].append(done)
    return max(end, done)


def _tree_chunk(nbytes: float, f: Fabric, proto: str) -> float:
    """The bytes a tree moves per step and channel (``calcCollChunking``): one FIFO step, and on
    LL128 halved while a channel would get too few chunks to fill the tree's pipeline."""
    nch = channels(f)
    if proto == "LL128":
        chunk, g = LL128_BUFFER / NCCL_STEPS * PAYLOAD["LL128"], f.gpus_per_node
        depth = 1 + int(math.log2(f.nodes)) + 0.1 * g
        while nbytes / (nch * chunk) < depth * 64 / g and chunk > 131072:
            chunk /= 2
        while nbytes / (nch * chunk) < depth * 16 / g and chunk > 32768:
            chunk /= 2
    else:
        chunk = LL_BUFFER / NCCL_STEPS / 2 if proto == "LL" else PLATFORMS[f.platform].simple_buffer / NCCL_STEPS
    return min(chunk, nbytes / nch)


def _tree(nbytes: float, f: Fabric, proto: str) -> float:
    """A tree all-reduce's time (us): a chain in each node, a double binary tree over nodes. NCCL's
    latency along the path plus the bytes at the tree's rate: each GPU of a chain sends the buffer
    up and down, a node sends it once each way on 2 nodes and twice beyond, each chunk a network
    message that pays ``net_message_us``; NCCL's per-channel tree ceilings and its mid-size
    correction apply, and on LL / LL128 the broadcast's share of the channel's warps. Beyond 2 nodes
    each level with two children adds a chunk's transfer each way to the path."""
    g, nodes, t = f.gpus_per_node, f.nodes, f.t()
    p = PROTOCOLS.index(proto)
    more = 0 if nodes <= 2 else 1
    per_channel = tuner.TREE_LL128_PER_CHANNEL[more] if proto == "LL128" else tuner.TREE_PER_CHANNEL[more]
    cap = tuner.graph(f)[0] * per_channel / 2  # a tree's algbw is half its bus bandwidth (tuning.cc)
    if proto == "LL":
        cap = min(cap, tuner.ll_max_bus(f) / 2)
    if proto != "Simple":  # the broadcast's 30% of the channel's warps, at the ring's per-channel ceiling
        cap = min(cap, TREE_BCAST_SHARE * _cap(proto, f))
    net = _node_net(f, t) / (1.0 if nodes == 2 else 2.0) * PAYLOAD[proto]
    chunk = _tree_chunk(nbytes, f, proto)
    net *= chunk / (chunk + t.net_message_us * net * 1e3 / channels(f))
    nvl = f.nvlink_gb_per_s / 2 * PAYLOAD[proto] if g > 1 else math.inf
    rate = min(nvl, net, cap) * tuner.tree_correction(proto, nbytes)
    lat_net = (tuner.NET_HOP_US["tree"][p] + f.net_hop_us * (2 if proto == "Simple" else 1)
               + t.net_message_us)
    levels = max(1, math.ceil(math.log2(nodes)))
    # below the root's one child every node of NCCL's binary tree has two children on the channel's NIC
    # (trees.cc ncclGetBtree): the second child's chunk lands a chunk's transfer after the first going up,
    # and leaves one after it coming down
    fan_in = 2 * (levels - 1) * chunk / (_node_net(f, t) * PAYLOAD[proto] * 1e3 / channels(f))
    path = 2 * (g - 1) * tuner.NVLINK_HOP_US["tree"][p] + 2 * levels * lat_net + fan_in
    return tuner.BASE_US["tree"][p] + path + nbytes / (rate * 1e3)


def _nvls(coll: str, nbytes: float, f: Fabric, algo: str) -> float:
    """NVLink SHARP all-reduce (one node) or NVLS tree (NVLS in each node, a tree between nodes):
    the switch reduces at ``nvls_efficiency`` of NVLink; between nodes half the buffer crosses each
    way on 2 nodes, a tree beyond."""
    t = f.t()
    rate = t.nvls_efficiency * f.nvlink_gb_per_s
    if algo == "nvls_tree":
        rate = min(rate, _node_net(f, t) / (0.5 if f.nodes == 2 else 2.0))
        lat = t.nvls_hop_us + 2 * max(1, math.ceil(math.log2(f.nodes))) * (
            tuner.NET_HOP_US["nvls_tree"][2] + 2 * f.net_hop_us)
    else:
        lat = t.nvls_hop_us
    return lat + nbytes / (rate * 1e3)


def _p2p_chunk(peer_bytes: float, f: Fabric) -> float:
    """The network chunk NCCL cuts one peer's message into (``addP2pToPlan``, src/enqueue.cc): the P2P
    net chunk, a quarter of it for a message under one chunk, half for one under eight. The chunk is
    at most one step of the Simple buffer (src/init.cc: a P2P chunk is no larger than a collective's)."""
    pf = PLATFORMS[f.platform]
    step = min(pf.p2p_net_chunk, pf.simple_buffer // NCCL_STEPS)
    return step / 4 if peer_bytes < step else step / 2 if peer_bytes < 8 * step else step


def _p2p(nbytes: float, f: Fabric) -> float:
    """alltoall as NCCL runs it, sends and receives: local peers over NVLink, remote ones over the
    GPU's own NICs (alltoall cannot aggregate a node's NICs, nccl-tests#267), a round per remote peer,
    and each remote peer's message in network chunks that each cost the proxy ``a2a_message_us``."""
    n, g, nodes, t = f.world, f.gpus_per_node, f.nodes, f.t()
    remote, local = (n - g) / n, (g - 1) / n
    p = f.nodes_per_leaf or nodes
    nic = f.nic_gb_per_s * t.a2a_efficiency * f.spine_share((nodes - min(p, nodes)) / max(1, nodes - 1))
    rate = 1.0 / max(local / f.nvlink_gb_per_s, remote / nic if remote else 0.0)
    peer = nbytes / n
    messages = (n - g) * math.ceil(peer / _p2p_chunk(peer, f))
    lat = (tuner.BASE_US["ring"][2] + tuner.NVLINK_HOP_US["ring"][2] + (t.a2a_base_us if nodes > 1 else 0.0)
           + (n - g) * t.a2a_peer_us + messages * t.a2a_message_us)
    return lat + nbytes / (rate * 1e3)


def estimate_algo(coll: str, nbytes: float, f: Fabric, algo: str, proto: str) -> Estimate:
    """The time of ``coll`` on ``nbytes`` with a given algorithm and protocol."""
    if coll not in COLLECTIVES:
        raise ValueError(f"unknown collective {coll!r}; allowed: {', '.join(COLLECTIVES)}")
    if f.world < 2 or nbytes <= 0:
        return Estimate(coll, nbytes, 0.0, algo, proto, 0.0)
    if algo == "p2p":
        time = _p2p(nbytes, f)
    elif algo == "ring":
        time = _ring(coll, nbytes, f, proto)
    elif algo == "tree":
        time = _tree(nbytes, f, proto)
    else:
        time = _nvls(coll, nbytes, f, algo)
    return Estimate(coll, nbytes, time, algo, proto, nbytes / (time * 1e3) * bus_factor(coll, f.world))


def estimate(coll: str, nbytes: float, f: Fabric) -> Estimate:
    """The time of ``coll`` on ``nbytes`` (bytes per rank, nccl-tests' sizes) as NCCL would run it:
    the algorithm and protocol NCCL picks (:func:`mkernel.nccl_tuner.choose`; alltoall: sends and
    receives on Simple), timed by how that algorithm moves the data."""
    if coll not in COLLECTIVES:
        raise ValueError(f"unknown collective {coll!r}; allowed: {', '.join(COLLECTIVES)}")
    if coll == "alltoall" or f.world < 2:  # (one rank: nothing crosses, nothing for NCCL to choose)
        return estimate_algo(coll, nbytes, f, "p2p" if coll == "alltoall" else "ring", "Simple")
    algo, proto = tuner.choose(coll, nbytes, f)
    return estimate_algo(coll, nbytes, f, algo, proto)


def with_terms(f: Fabric, **changes) -> Fabric:
    """``f`` with some of its network's terms changed (for fitting and what-ifs)."""
    return replace(f, terms=replace(f.t(), **changes))
