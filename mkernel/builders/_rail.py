"""The fused GEMM ops' inter-node phase: which algorithm runs over each rail, and in what chunk order.

Rank (n, l) talks over the network only to its rail peers (m, l). What it sends them is declared
per op; how is a named choice, ``Workload.internode``:

- ``direct``: every piece goes straight to each node that needs it, one message per node
  (GEMM+AR: each owner's chunk sums to every rail peer, so N - 1 times the owner's share leaves
  each GPU; GEMM+RS: each block's node sum to its owner, a reduce-scatter already; AG+GEMM: the own
  shard to every node);
- ``twoshot`` (GEMM+AR): a direct reduce-scatter, then a direct all-gather, over groups of N
  chunks, chunk p of a group finalised on node p: 2 (N - 1) / N of the share leaves each GPU;
- ``ring``: a ring over the rail, chunk by chunk (GEMM+AR: ring reduce-scatter + all-gather of each
  group, the same bytes as twoshot with one peer per NIC; AG+GEMM: each shard relayed node to node);
- ``auto`` (the default): :func:`choose`, from node count and size.

Node symmetry (what lets the simulator fold the cluster onto node 0, :mod:`mkernel.sim.collapse`)
needs every node's queues to be node 0's under the node shift. An algorithm in which chunk p is
special on node p is symmetric only if each node visits the chunks of a group in an order relative
to itself: :func:`chunk_order`. Signals are then indexed by that relative position, never by the
absolute chunk; chunks beyond the last whole group take the ``direct`` exchange, which needs no order.
"""
from __future__ import annotations

from ..cluster import Cluster
from ..errors import ProblemError
from ..problems import Workload

ALGORITHMS = {"gemm_ar": ("direct", "twoshot", "ring"), "gemm_rs": ("direct", "ring"), "ag_gemm": ("direct", "ring")}
GROUPED = ("twoshot", "ring")  # the algorithms that work on groups of N chunks
# auto, from the simulated study (docs/scaling.md): GEMM+AR's one-shot exchange sends N - 1 shares,
# the grouped ones 2 (N - 1) / N; at 2 nodes both send one share and direct is a hop shorter, beyond
# it twoshot (two hops) beats the ring (2 (N - 1) hops). AG+GEMM's ring staggers the arrivals, so
# compute starts on each shard as it lands, where direct sends share the NIC and land together; the
# relay's N - 1 hops cost more than that beyond 32 nodes, and on SRD's per-message costs from 8.
AUTO_AR_DIRECT_NODES = 2
AUTO_AG_RING_NODES = {"ib_rc": (3, 32), "ibgda": (3, 32)}  # per transport: node counts where ag_gemm relays


def choose(w: Workload, c: Cluster) -> str:
    """The algorithm a build runs: the workload's choice, or ``auto``'s pick; refused, naming the
    allowed ones, where the op does not have it."""
    allowed = ALGORITHMS.get(w.kernel, ("direct",))
    if w.internode != "auto":
        if w.internode not in allowed:
            raise ProblemError(f"{w.kernel} has no internode = {w.internode!r}; allowed: auto, {', '.join(allowed)}")
    if c.nodes <= 1:  # no network phase: every choice is the same build
        return "direct"
    if w.internode != "auto":
        return w.internode
    if w.kernel == "gemm_ar":
        return "direct" if c.nodes <= AUTO_AR_DIRECT_NODES else "twoshot"
    low, high = AUTO_AG_RING_NODES.get(c.transport, (0, 0))
    if w.kernel == "ag_gemm" and low <= c.nodes <= high:
        return "ring"
    return "direct"


def group_offsets(nodes: int, algorithm: str) -> list[int]:
    """The node offsets d (chunk p = node + d of a group) in the order a node visits a group's
    chunks: twoshot the other nodes' chunks first and its own last; ring in its reduce-scatter's
    hop order (the chunk it starts first, then the one that arrives next, ..., its own last)."""
    if algorithm == "twoshot":
        return [*range(1, nodes), 0]
    return list(range(nodes - 1, -1, -1))


def chunk_order(nchunks: int, whole: int, nodes: int, node: int, algorithm: str) -> list[int]:
    """The absolute chunk numbers in the order ``node`` visits them: the first ``whole`` (a multiple
    of ``nodes``) in groups of ``nodes`` chunks, each in :func:`group_offsets` order, then the rest
    in order."""
    if algorithm not in GROUPED or not whole:
        return list(range(nchunks))
    offsets = group_offsets(nodes, algorithm)
    return [gi * nodes + (node + d) % nodes for gi in range(whole // nodes) for d in offsets] + list(range(whole, nchunks))
