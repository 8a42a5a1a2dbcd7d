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

ALGORITHMS = {"gemm_ar": ("direct", "twoshot", "ring"), "gemm_rs": ("direct",), "ag_gemm": ("direct", "ring")}
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


def rail_collective(x, visit: list, algorithm: str) -> None:
    """GEMM+AR's grouped inter-node all-reduce on one rank: ``visit`` holds (position j, absolute
    chunk, its owned tiles) of whole groups in :func:`chunk_order` order, so position j of group
    gi = j // N has node offset ``group_offsets[j % N]`` and the last of every group is the own chunk.

    Signals (indexed by position, so every node runs node 0's queues): ``chunk_ready[j]`` a
    chunk's node sums are in PART (intra, or compute at G = 1); ``arrived[j]`` / ``rs[j]`` a
    reduce-scatter part landed in RECV; ``staged[j]`` a ring hop's sum is in STAGE; ``fin[j]`` a
    chunk's final sum is in FIN (bumped by each tile summed here, or once by the put that brought it).
    The SEND queue runs each group's reduce-scatter, then the previous group's all-gather, so the
    network keeps one group of sums in flight while the last one spreads."""
    from ..ir import Op, Role, Signal, Step, Wait
    from ._tiling import runs

    sb, w, c, rank, regs = x.sb, x.w, x.c, x.rank, x.regs
    g, nodes, node, local = c.gpus_per_node, c.nodes, c.node_of(rank), c.local_of(rank)
    at = [c.rank(m, local) for m in range(nodes)]
    nxt = at[(node + 1) % nodes]
    groups = [visit[i:i + nodes] for i in range(0, len(visit), nodes)]

    def sig(name: str, j: int, r: int = rank) -> Signal:
        return Signal(r, name, j)

    def ag_chunk(j: int) -> int:
        return x.nchunks + j  # all-gather puts get their own chunk numbers

    def reduce(group: int, i: int, chunk, into: str, waits, signal: str, sources) -> None:
        j = group * nodes + i
        for run in runs(chunk, stride=g):
            t = run[0]
            sb.add(rank, Role.RECV, Op.REDUCE, waits=waits,
                   reads=(regs.slot("PART", rank, t),) + tuple(regs.slot("RECV", rank, t, m) for m in sources),
                   writes=(regs.slot(into, rank, t),), signals=(sig(signal, j),), label=f"tile {{}} rail sum hop {i}",
                   count=len(run), step=Step(((0, w.tile_m, 0),) * (len(sources) + 2), ((0, 0),), label=(t.index, g)))

    def reduce_scatter(gi: int) -> None:
        group, base = groups[gi], gi * nodes
        if algorithm == "twoshot":  # the other nodes' chunks to their finalisers, then add the N - 1 parts
            for i, (j, ci, chunk) in enumerate(group[:-1]):
                peer = at[(node + i + 1) % nodes]
                sb.add(rank, Role.SEND, Op.PUT, waits=(Wait(sig("chunk_ready", j), len(chunk)),), chunk=j,
                       reads=(regs.chunk("PART", rank, chunk),), writes=(regs.chunk("RECV", peer, chunk, node),),
                       signals=(sig("arrived", base + nodes - 1, peer),), label=f"chunk {ci} sums to its finaliser")
            j, ci, chunk = group[-1]
            reduce(gi, nodes - 1, chunk, "FIN", (Wait(sig("arrived", j), nodes - 1), Wait(sig("chunk_ready", j), len(chunk))),
                   "fin", [m for m in range(nodes) if m != node])
            return
        for h, (j, ci, chunk) in enumerate(group):  # ring: hop h carries the chunk that started h hops back
            ready = Wait(sig("chunk_ready", j), len(chunk))
            if h == 0:
                src, waits = "PART", (ready,)
            else:
                into = "FIN" if h == nodes - 1 else "STAGE"
                reduce(gi, h, chunk, into, (Wait(sig("rs", j), 1), ready), "fin" if into == "FIN" else "staged", [0])
                if into == "FIN":
                    break
                src, waits = "STAGE", (Wait(sig("staged", j), len(chunk)),)
            sb.add(rank, Role.SEND, Op.PUT, waits=waits, chunk=j, reads=(regs.chunk(src, rank, chunk),),
                   writes=(regs.chunk("RECV", nxt, chunk),), signals=(sig("rs", j + 1, nxt),),
                   label=f"chunk {ci} ring sum hop {h}")

    def all_gather(gi: int) -> None:
        group, base = groups[gi], gi * nodes
        j, ci, own = group[-1]
        if algorithm == "twoshot":  # the own final sum to every other node
            for d in range(1, nodes):
                sb.add(rank, Role.SEND, Op.PUT, waits=(Wait(sig("fin", j), len(own)),), chunk=ag_chunk(j),
                       reads=(regs.chunk("FIN", rank, own),), writes=(regs.chunk("FIN", at[(node + d) % nodes], own),),
                       signals=(sig("fin", base + nodes - d - 1, at[(node + d) % nodes]),),
                       label=f"chunk {ci} final to node {(node + d) % nodes}")
            return
        for a in range(nodes - 1):  # ring: the own sum first, then each arrival passed on
            jj, cj, chunk = group[-1] if a == 0 else group[a - 1]
            wait = Wait(sig("fin", jj), len(chunk) if a == 0 else 1)
            sb.add(rank, Role.SEND, Op.PUT, waits=(wait,), chunk=ag_chunk(jj), reads=(regs.chunk("FIN", rank, chunk),),
                   writes=(regs.chunk("FIN", nxt, chunk),), signals=(sig("fin", base + a, nxt),),
                   label=f"chunk {cj} ring final hop {a}")

    def to_out(gi: int) -> None:
        """G = 1 has no intra role: the receive role copies each final sum from FIN to OUT."""
        for i, (j, ci, chunk) in enumerate(groups[gi]):
            own = i == nodes - 1
            for run in runs(chunk, stride=g):
                t = run[0]
                sb.add(rank, Role.RECV, Op.COPY, waits=(Wait(sig("fin", j), len(chunk) if own else 1),),
                       reads=(regs.slot("FIN", rank, t),), writes=(regs.tile("OUT", rank, t),),
                       signals=(x.out_done(rank),), label="tile {} out", count=len(run),
                       step=Step(((0, w.tile_m, 0), (0, 0, t.cols)), waits=(0,), label=(t.index, g)))

    # SEND: rs(0), rs(1), ag(0), rs(2), ag(1), ...; RECV: the sums of each group, then (G = 1) the
    # previous group's copies out. Every wait is on a task at an earlier place of some node's queue.
    for gi in range(len(groups)):
        reduce_scatter(gi)
        if gi:
            all_gather(gi - 1)
            if g == 1:
                to_out(gi - 1)
    if groups:
        all_gather(len(groups) - 1)
        if g == 1:
            to_out(len(groups) - 1)
