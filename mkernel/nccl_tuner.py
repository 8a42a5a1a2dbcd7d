"""Which algorithm and protocol NCCL runs a collective with: NCCL's own choice, not the fastest.

NCCL does not measure; it picks the (algorithm, protocol) whose *estimate* is least, from the cost
table of ``src/graph/tuning.cc`` (NCCL 2.27-2.28): a base latency, per-hop latencies on NVLink and
on the network, and a bus bandwidth per channel of the topology graph, capped per protocol. The
estimate is not the time (the measured curves show both agreeing and not), so :mod:`mkernel.nccl`
times the pick with its own model; but where NCCL switches protocol is where the published curves
step (a 2-node p5 all_gather drops from LL128 to Simple at 256 MiB), so the switch points come from
NCCL's table with NCCL's inputs:

- the graph NCCL's search builds (``src/graph/search.cc``): on an 8-GPU H100/H200 node with a
  400 Gb/s NIC path per GPU, 8 ring channels at 45 GB/s (Hopper keeps them: ``ncclTopoDupChannels``
  skips graphs under 50 GB/s with more than 4 channels); on one NVSwitch node 12 at 30;
- the network plugin's reported latency, added to every network hop (twice for Simple, its flush):
  aws-ofi-nccl reports 75 us on p5/p5e and 35 us on p5en (``src/platform-aws.cpp``), IB plugins 0;
- the CPU vendor (``getNetOverhead``: 2 us per ring step on AMD hosts, p5; 1 on Intel, p5en; and the
  LL bandwidth ceilings ``llMaxBws``).

Beyond 2 nodes on AWS, aws-ofi-nccl's region tuner overrides the table: polygons in (bytes, ranks)
per platform (``src/tuner/nccl_ofi_regions.cpp``, v1.16.3, the version of the p5 curves we check;
it defers to NCCL at 2 nodes or fewer). The vertices below are that file's, transcribed as data.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .nccl import Fabric

PROTOCOLS = ("LL", "LL128", "Simple")


@dataclass(frozen=True, slots=True)
class Platform:
    """What NCCL reads off the host: CPU vendor, the network plugin's reported latency (us, added
    to every network hop of NCCL's estimate), and the Simple buffer (NCCL_BUFFSIZE)."""

    cpu: str = "intel"
    plugin_latency_us: float = 0.0
    simple_buffer: int = 4 << 20
    p2p_net_chunk: int = 128 << 10  # NCCL_P2P_NET_CHUNKSIZE: a send/recv's network step


# aws-ofi-nccl reports 75 us on p5 (AMD hosts) and 35 on p5en (Intel) and sets NCCL_P2P_NET_CHUNKSIZE to
# 512 KiB on both (src/platform-aws.cpp); AWS runs NCCL with NCCL_BUFFSIZE=8 MiB (awsome-distributed-training's
# nccl-tests job). IB: NCCL's defaults.
PLATFORMS = {"": Platform(), "p5": Platform("amd", 75.0, 8 << 20, 512 << 10),
             "p5en": Platform("intel", 35.0, 8 << 20, 512 << 10)}

# tuning.cc: baseLatencies and hwLatencies (us), index = protocol
BASE_US = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4), "nvls": (0.0, 0.0, 0.0), "nvls_tree": (0.0, 0.0, 0.0)}
NVLINK_HOP_US = {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4), "nvls": (0.0, 0.0, 25.0),
                 "nvls_tree": (0.0, 0.0, 25.0)}
NET_HOP_US = {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0), "nvls": (0.0, 0.0, 18.0),
              "nvls_tree": (0.0, 0.0, 20.9)}
LL_MAX_BUS = {"intel": (39.0, 20.4), "amd": (22.5, 19.0)}  # llMaxBws, 2 nodes / more; Hopper one node: 141
LL_MAX_BUS_ONE_NODE = 141.0
RING_LL128_PER_CHANNEL = 36.7  # perChMaxRingLL128Bws, Hopper
TREE_PER_CHANNEL = (41.4, 36.0)  # perChMaxTreeBws, Hopper, 2 nodes / more
TREE_LL128_PER_CHANNEL = (36.7, 29.0)  # perChMaxTreeLL128Bws
NVLS_TREE_PER_CHANNEL = (57.7, 45.5)  # perChMaxNVLSTreeBws
NVLS_EFFICIENCY = 0.85  # nvlsEfficiency, Hopper
NVLS_CHANNELS = 16  # NVLS_NCHANNELS_SM90 (src/transport/nvls.cc)
RING_PLATEAU = 1.4  # a multi-node ring all-reduce on Simple pays 1.4x its latency (sm80+)
# treeCorrectionFactor[protocol][log2(bytes / 64)]: NCCL's own measured shortfall of trees at mid sizes
TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9))
GRAPH_MULTI_NODE = (8, 48.0)  # ring/tree graph channels and GB/s per channel, 8-GPU node, 400 Gb/s per GPU
GRAPH_ONE_NODE = (12, 30.0)  # NVSwitch node: 6 x 60 doubled by ncclTopoDupChannels


# Threads per channel and bytes per thread below which NCCL runs a ring or tree call on fewer channels
# (src/include/device.h NCCL_{LL,LL128,SIMPLE}_MAX_NTHREADS, the ring's Simple at 512 on an NVLink graph;
# src/include/comm.h NCCL_*_THREAD_THRESHOLD, which tuning.cc multiplies by the ranks for the ring's LL)
MAX_THREADS = (512, 640, 512)
THREAD_THRESHOLD = (8, 8, 64)


def call_channels(algo: str, proto: str, nbytes: float, f: Fabric, nch: int) -> int:
    """The channels NCCL runs one call on (``topoGetAlgoInfo``, src/enqueue.cc): the largest nc <= ``nch``
    (at least 1) with ``nbytes`` (an all-gather's or reduce-scatter's whole buffer) >= nc x threads x
    threshold. The ring's LL threshold grows with the ranks: on 32 ranks a 1 MiB LL ring runs on 8 of 16
    channels, on 512 a 4 MiB one on 2. NCCL shrinks trees by the same rule; the model's trees do not (only
    calls below 64-512 KiB on 16 channels would shrink). Each channel keeps its 1/nch share of the links
    (docs/nccl-model.md: checked at 32 ranks on half the channels only)."""
    p = PROTOCOLS.index(proto)
    per_channel = MAX_THREADS[p] * THREAD_THRESHOLD[p] * (f.world if algo == "ring" and proto == "LL" else 1)
    nc = nch
    while nc >= 2 and nbytes < nc * per_channel:
        nc -= 1
    return nc


def graph(f: Fabric) -> tuple[int, float]:
    """(channels, GB/s per channel) of NCCL's ring/tree graph on fabric ``f``."""
    return GRAPH_ONE_NODE if f.nodes == 1 else GRAPH_MULTI_NODE


def tree_correction(proto: str, nbytes: float) -> float:
    """NCCL's tree bandwidth correction at this size (1 outside its table)."""
    i = int(math.log2(nbytes / 64)) if nbytes >= 64 else -1
    return TREE_CORRECTION[PROTOCOLS.index(proto)][i] if 0 <= i < 23 else 1.0


def ll_max_bus(f: Fabric) -> float:
    """NCCL's LL bus-bandwidth ceiling (GB/s) for this fabric."""
    return LL_MAX_BUS_ONE_NODE if f.nodes == 1 else LL_MAX_BUS[f.cpu][0 if f.nodes <= 2 else 1]


def candidates(coll: str, f: Fabric) -> list[tuple[str, str]]:
    """The (algorithm, protocol) pairs NCCL may use for ``coll`` on ``f`` (NVLS only where allowed,
    LL128 only where the fabric enables it)."""
    protocols = [p for p in PROTOCOLS if f.ll128 or p != "LL128"]
    out = [("ring", p) for p in protocols]
    if coll == "all_reduce" and f.nodes > 1:
        out += [("tree", p) for p in protocols]
    if coll == "all_reduce" and f.nvls:
        out.append(("nvls_tree" if f.nodes > 1 else "nvls", "Simple"))
    return out


def table(coll: str, f: Fabric) -> dict[tuple[str, str], tuple[float, float]]:
    """NCCL's cost table for ``coll`` on ``f``: (algorithm, protocol) -> (latency us, algbw GB/s)."""
    n, nodes, ppn = f.world, f.nodes, f.gpus_per_node
    nsteps = 2 * (n - 1) if coll == "all_reduce" else n - 1
    gch, gbw = graph(f)
    more = 0 if nodes <= 2 else 1
    overhead = 0.0 if nodes == 1 else (2.0 if f.cpu == "amd" else 1.0)
    out = {}
    for a, p in candidates(coll, f):
        pi = PROTOCOLS.index(p)
        bw = gch * gbw
        if a.startswith("nvls"):
            intra = gbw * gch * NVLS_EFFICIENCY * (NVLS_CHANNELS - 1) / NVLS_CHANNELS * 2
            inter = gch * gbw * (2 if nodes <= 2 else 1) if nodes > 1 else math.inf
            bw = min(intra, inter, NVLS_CHANNELS * NVLS_TREE_PER_CHANNEL[more] if a == "nvls_tree" else math.inf)
        elif a == "ring":
            bw = {"LL": min(ll_max_bus(f), bw * 0.5), "LL128": min(bw * 0.92, gch * RING_LL128_PER_CHANNEL),
                  "Simple": bw}[p]
        else:
            bw = min(bw * 0.92, gch * TREE_PER_CHANNEL[more])
            bw = {"LL": min(bw / 3.8, ll_max_bus(f)), "LL128": min(bw * 120 / 128, gch * TREE_LL128_PER_CHANNEL[more]),
                  "Simple": bw}[p]
        bw *= n / nsteps if a != "tree" else 0.5
        intra = NVLINK_HOP_US[a][pi]
        inter = NET_HOP_US["tree" if ppn == 1 else a][pi] + f.plugin_latency_us * (2 if p == "Simple" else 1)
        lat = BASE_US[a][pi]
        if a == "ring":
            n_inter = 0 if nodes == 1 else (2 * (nodes - 1) if coll == "all_reduce" else nodes - 1)
            lat += (nsteps - n_inter) * max(intra, overhead * (3 if p == "Simple" else 1)) + n_inter * inter
        elif a == "tree":
            lat += 2 * ((ppn - 1) * intra + int(math.log2(nodes)) * inter)
        elif a == "nvls":
            lat = intra + (inter if nodes > 1 else 0.0)
        else:
            lat += intra + 2 * int(math.log2(nodes)) * inter
        out[(a, p)] = (lat, bw)
    return out


def choose(coll: str, nbytes: float, f: Fabric) -> tuple[str, str]:
    """The (algorithm, protocol) NCCL runs ``coll`` on ``nbytes`` with: the region tuner's where it
    has a region (AWS, beyond 2 nodes), else the least of NCCL's own estimates."""
    allowed = candidates(coll, f)
    picked = _region(coll, nbytes, f, allowed)
    if picked:
        return picked
    best, pick = math.inf, allowed[0]
    for (a, p), (lat, bw) in table(coll, f).items():
        if a == "tree":
            bw *= tree_correction(p, nbytes)
        if a == "ring" and p == "Simple" and f.nodes > 1 and coll == "all_reduce":
            lat *= RING_PLATEAU
        t = lat + nbytes / (1e3 * bw)
        if t < best:
            best, pick = t, (a, p)
    return pick


# aws-ofi-nccl's regions (v1.16.3, 8 GPUs per node): per platform and collective, in order, the
# (algorithm, protocol) and the polygon of (bytes, ranks) it takes. MAX_*: the file's TUNER_MAX_*.
MAX_SIZE, MAX_RANKS = 100.0 * (1 << 30), 1024.0 * 1024


def _extend(a: tuple, b: tuple) -> tuple[float, float]:
    """The file's ``extend_region``: the line through a and b carried out to the far corner."""
    if a[0] == b[0]:
        return (a[0], MAX_RANKS)
    if a[1] == b[1]:
        return (MAX_SIZE, a[1])
    m = (a[1] - b[1]) / (a[0] - b[0])
    c = b[1] - m * b[0]
    y = m * MAX_SIZE + c
    return (MAX_SIZE, y) if y < MAX_RANKS else ((MAX_RANKS - c) / m, MAX_RANKS)


_P5_TREE = _extend((402653184, 2048), (402653184, 4096))
_P5_NVLS = _extend((8053063680, 160), (9663676416, 192))
_EN_TREE_LL = _extend((262144, 192), (262144, 1024))
_EN_TREE_LL128 = _extend((150994944, 128), (251658240, 1024))
_EN_NVLS = _extend((6442450944, 256), (17179869184, 768))
_EN_RING_LL = _extend((8388608, 256), (33554432, 1024))
_EN_RING_LL128 = _extend((8589934592, 512), (17179869184, 1024))
_EN_GATHER = (
    ("ring", "LL", ((0, 16), (131072, 16), (262144, 32), (8388608, 256), (33554432, 1024), _EN_RING_LL,
                    (0, MAX_RANKS))),
    ("ring", "LL128", (_EN_RING_LL, (33554432, 1024), (8388608, 256), (262144, 32), (131072, 16), (268435456, 16),
                       (2147483648, 128), (8589934592, 512), (17179869184, 1024), _EN_RING_LL128)),
    ("ring", "Simple", (_EN_RING_LL128, (17179869184, 1024), (8589934592, 512), (268435456, 16),
                        (17179869184, 16), (MAX_SIZE, 16))))
REGIONS = {
    ("p5", "all_reduce"): (
        ("tree", "LL128", ((0, 16), (31457280, 16), (37748736, 32), (117440512, 64), (301989888, 128),
                           (301989888, 256), (335544320, 512), (536870912, 1024), (402653184, 2048),
                           (402653184, 4096), _P5_TREE, (0, _P5_TREE[1]))),
        ("nvls_tree", "Simple", ((31457281, 16), (MAX_SIZE, 16), (31457281, 16))),
        ("ring", "LL128", ((31457280, 17), (1073741824, 17), (2147483648, 64), (2147483648, 128),
                           (1342177280, 160), (2147483648, 256), (1074790400, 256), (444596224, 160),
                           (301989888, 128), (117440512, 64), (37748736, 32))),
        ("nvls_tree", "Simple", ((2147483648, 128), (6442450944, 128), (8053063680, 160), (9663676416, 192), _P5_NVLS,
                                 _P5_TREE, (402653184, 4096), (402653184, 2048), (536870912, 1024),
                                 (335544320, 512), (301989888, 256), (310378496, 160), (444596224, 160),
                                 (1074790400, 256), (2684354560, 256), (2147483648, 224), (1342177280, 160))),
        ("ring", "Simple", ((1073741824, 17), (_P5_NVLS[0], 17), _P5_NVLS, (9663676416, 192), (8053063680, 160),
                            (2684354560, 64), (1610612736, 32)))),
    ("p5en", "all_reduce"): (
        ("tree", "LL", ((0, 16), (262144, 16), (262144, 1024), _EN_TREE_LL)),
        ("tree", "LL128", (_EN_TREE_LL, (262144, 1024), (262144, 16), (14680064, 16), (150994944, 128),
                           (251658240, 1024), _EN_TREE_LL128)),
        ("ring", "LL128", ((150994944, 128), (14680064, 16), (33554432, 16), (536870912, 32), (536870912, 128))),
        ("nvls_tree", "Simple", (_EN_TREE_LL128, (251658240, 1024), (150994944, 128), (536870912, 128),
                                 (536870912, 32), (6442450944, 256), (17179869184, 768), _EN_NVLS)),
        ("ring", "Simple", (_EN_NVLS, (17179869184, 768), (6442450944, 256), (536870912, 32), (33554432, 16),
                            (1073741824, 16), (MAX_SIZE, 16)))),
    ("p5en", "all_gather"): _EN_GATHER,
    ("p5en", "reduce_scatter"): _EN_GATHER,  # the file's reduce_scatter regions are the same polygons
}


def _region(coll: str, nbytes: float, f: Fabric, allowed: list) -> tuple[str, str] | None:
    """The region tuner's pick, or None where it defers to NCCL (2 nodes or fewer, no region)."""
    regions = REGIONS.get((f.platform, coll))
    if not regions or f.nodes <= 2 or f.gpus_per_node != 8:
        return None
    point = (float(nbytes), float(f.world))
    for a, p, polygon in regions:
        if (a, p) in allowed and inside(point, polygon):
            return a, p
    return None


def inside(point: tuple[float, float], polygon: tuple) -> bool:
    """Whether ``point`` lies in ``polygon`` or on its edge (ray casting)."""
    x, y = point
    hit = False
    for (x1, y1), (x2, y2) in zip(polygon, polygon[1:] + polygon[:1]):
        cross = (x2 - x1) * (y - y1) - (y2 - y1) * (x - x1)
        if (abs(cross) <= 1e-9 * max(1.0, abs(x2 - x1)) * max(1.0, abs(y2 - y1))
                and min(x1, x2) <= x <= max(x1, x2) and min(y1, y2) <= y <= max(y1, y2)):
            return True
        if (y1 > y) != (y2 > y) and x < x1 + (y - y1) * (x2 - x1) / (y2 - y1):
            hit = not hit
    return hit
