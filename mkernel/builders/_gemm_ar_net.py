"""GEMM+AR's network phase on one rank: how each owner's node sums cross the rail (the choice is
:mod:`._rail`'s), and where a tile sits in each buffer.

- :func:`direct_exchange`: every chunk of sums to every rail peer; each rank adds all N.
- :func:`grouped_exchange`: twoshot or ring over groups of N chunks, chunk by chunk.
- :func:`shared_exchange`: a share of fewer than N chunks, cut in N row pieces, reduce-scattered and
  all-gathered twoshot-style once every tile of it is summed in the node.

The receive role does every inter-node sum; the send role every put. Each function's queue order
keeps every wait on a task at an earlier place of some node's queue, so no SM budget deadlocks.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..cluster import Cluster
from ..ir import Op, Region, Role, Signal, Step, Wait, new_region, new_signal, new_step
from ..slots import quick_new_each, settable
from ..problems import Workload
from ..schedule_builder import ScheduleBuilder
from ._tiling import runs, split_rows

# the settable subclasses (slots.settable) of the regions, signals and waits made inline here and in the intra queue
REGION, SIGNAL, WAIT = settable(Region), settable(Signal), settable(Wait)
_REGIONS_EACH: dict[int, Callable] = {}  # n -> its regions_each (made once each)


def regions_each(n: int) -> Callable:
    """A function making Region(buf, rank, ...) for each of a sequence of exactly ``n`` ranks (n >= 1), in
    one call (slots.quick_new_each, unrolled for ``n``): the intra queue's sums and broadcasts."""
    made = _REGIONS_EACH.get(n)
    if made is None:
        made = _REGIONS_EACH[n] = quick_new_each(Region, "rank", n)
    return made


class Regions:
    """Where a tile sits in each buffer: OUT and P by the tile itself; PART, RECV, STAGE and FIN
    slot by slot (one tile_m x tile_n slot per owned tile, so a chunk of slots is one message)."""

    def __init__(self, w: Workload, slots: int, g: int) -> None:
        self.w, self.slots, self.g = w, slots, g

    def tile(self, buf: str, rank: int, t) -> Region:
        return new_region(buf, rank, t.row0, t.row1, t.col0, t.col1)

    def slot(self, buf: str, rank: int, t, section: int = 0) -> Region:
        r0 = (section * self.slots + t.index // self.g) * self.w.tile_m
        return new_region(buf, rank, r0, r0 + t.rows, 0, t.cols)

    def chunk(self, buf: str, rank: int, chunk, section: int = 0) -> Region:
        """The whole slots of a chunk (consecutive slots): one contiguous network message, padding
        of ragged edge tiles included."""
        r0 = (section * self.slots + chunk[0].index // self.g) * self.w.tile_m
        return new_region(buf, rank, r0, r0 + len(chunk) * self.w.tile_m, 0, self.w.tile_n)


@dataclass(frozen=True)
class RankNet:
    """What the network phase of one rank needs from its build."""

    sb: ScheduleBuilder
    w: Workload
    c: Cluster
    rank: int
    regs: Regions
    nchunks: int
    out_done: Callable[[int], Signal]
    # tile index -> its PART slot, and its OUT tile and final signal, on this rank as the intra queue
    # made them: the exchange's sum of the tile reads, writes and bumps the same, so it takes these
    # objects rather than equal new ones (a 2 x 8 GEMM+AR 32768^2 build: 16k of each)
    parts: dict[int, Region] = field(default_factory=dict)
    outs: dict[int, tuple[Region, Signal]] = field(default_factory=dict)
    # a chunk's position -> the chunk_ready signal the intra queue's sums of it bump (the exchange's
    # sum waits on it: one object, not two equal ones; 16k of each in that build), absent on one node
    ready: dict[int, Signal] = field(default_factory=dict)
    # a kind of task -> tile index -> its step, shared by the build's ranks: a tile's owner on each
    # node steps its sum, broadcast and exchange sum alike (a 2 x 8 GEMM+AR 32768^2 build: 26k steps)
    steps: dict = field(default_factory=dict)


def direct_exchange(x: RankNet, visit: list, cuts: list, rel: list[int]) -> None:
    """The one-shot exchange: each chunk of sums to every rail peer, and each rank adds all N
    (``cuts[ci]``: chunk ci's runs of tiles, :func:`runs`; ``rel[i]``: tile i's signal index)."""
    sb, w, c, rank, regs = x.sb, x.w, x.c, x.rank, x.regs
    g, nodes, node, local = c.gpus_per_node, c.nodes, c.node_of(rank), c.local_of(rank)
    others = [(node + d) % nodes for d in range(1, nodes)]
    if nodes == 2:  # one rail peer: consecutive chunks of one size, slot after slot, are one group of puts
        _puts_to_one_peer(x, visit, others[0])
    for j, ci, chunk in visit if nodes > 2 else ():
        ready = Wait(Signal(rank, "chunk_ready", j), len(chunk))
        for m in others:
            peer = c.rank(m, local)
            sb.add(rank, Role.SEND, Op.PUT, waits=(ready,), chunk=j,
                   reads=(regs.chunk("PART", rank, chunk),), writes=(regs.chunk("RECV", peer, chunk, node),),
                   signals=(Signal(peer, "arrived", j),), label=f"chunk {ci} to node {m}")
    steps: dict = {}  # one tuple object per kind of step (validate reads each once)
    done = x.out_done(rank)
    parts, outs, ready, made = x.parts, x.outs, x.ready, x.steps.setdefault("add", {})
    tile_m, arrivals, add_sum = w.tile_m, nodes - 1, sb.appender(rank, Role.RECV, Op.REDUCE, "tile {} add remote")
    bases = [m * regs.slots * tile_m for m in others]  # each other node's section of RECV (as Regions.slot places it)
    peer_base = bases[0] if nodes == 2 else None  # (the one other node's: a sum's reads made without a list)
    region_, signal_, wait_ = REGION, SIGNAL, WAIT
    for j, ci, chunk in visit:
        # the other nodes' sums have landed, and so has this node's own sum of the chunk (made inline:
        # a constructor's call each cost about a quarter more, 16k chunks in a 2 x 8 GEMM+AR 32768^2 build)
        flag = signal_()
        flag.rank, flag.name, flag.index = rank, "arrived", j
        flag.__class__ = Signal
        landed = wait_()
        landed.signal, landed.count = flag, arrivals
        landed.__class__ = Wait
        summed = wait_()
        summed.signal, summed.count = ready.get(j) or new_signal(rank, "chunk_ready", j), len(chunk)
        summed.__class__ = Wait
        waits = (landed, summed)
        for run in cuts[ci]:
            t = run[0]
            i = t.index
            step = made.get(i)
            if step is None:
                moves = steps.get(t.cols)
                if moves is None:
                    moves = steps[t.cols] = (((0, w.tile_m, 0),) * nodes + ((0, 0, t.cols * g),),
                                             ((0, g), (0, 0)) if g > 1 else ((0, 0),))
                step = made[i] = new_step(*moves, (), 0, (i, g), 0, (), 0)
            part = parts.get(i) or regs.slot("PART", rank, t)
            top, rows, cols = i // g * tile_m, t.rows, t.cols
            if peer_base is not None:  # (made here: a call a sum cost ~4k instructions, 16k sums)
                recv = region_()
                recv.buffer, recv.rank, recv.row0 = "RECV", rank, peer_base + top
                recv.row1, recv.col0, recv.col1 = peer_base + top + rows, 0, cols
                recv.__class__ = Region
                reads = (part, recv)
            else:
                reads = (part, *[new_region("RECV", rank, base + top, base + top + rows, 0, cols) for base in bases])
            out, final = outs.get(i) or (regs.tile("OUT", rank, t), new_signal(rank, "final", rel[i]))
            add_sum(reads, (out,), waits, (final, done) if g > 1 else (done,), len(run), step)


def _puts_to_one_peer(x: RankNet, visit: list, m: int) -> None:
    """:func:`direct_exchange`'s puts where there is one other node ``m``: a run of chunks that follow
    on (positions, chunk numbers and slots each one on, every chunk of one size) is one group, its
    members stepping one chunk (the task each member stands for is the one-put-per-chunk build's)."""
    sb, w, c, rank, regs = x.sb, x.w, x.c, x.rank, x.regs
    g, node = c.gpus_per_node, c.node_of(rank)
    peer = c.rank(m, c.local_of(rank))
    runs: list[list] = []
    pj = pci = -2  # (the previous chunk's position and number, its size and first tile index)
    size = first = 0
    for item in visit:  # (scalars compared one by one: 16k chunks in a 2 x 8 GEMM+AR 32768^2 build)
        j, ci, chunk = item
        if j == pj + 1 and ci == pci + 1 and len(chunk) == size and first + size * g == chunk[0].index:
            runs[-1].append(item)
        else:
            runs.append([item])
        pj, pci, size, first = j, ci, len(chunk), chunk[0].index
    for run in runs:
        j, ci, chunk = run[0]
        rows = len(chunk) * w.tile_m  # (a member's PART and RECV regions: the next chunk's slots)
        sb.add(rank, Role.SEND, Op.PUT, waits=(Wait(Signal(rank, "chunk_ready", j), len(chunk)),), chunk=j,
               reads=(regs.chunk("PART", rank, chunk),), writes=(regs.chunk("RECV", peer, chunk, node),),
               signals=(Signal(peer, "arrived", j),), label=f"chunk {{}} to node {m}", count=len(run),
               step=Step(((0, rows, 0), (0, rows, 0)), ((0, 1),), (1,), 1, (ci, 1)))


def grouped_exchange(x: RankNet, visit: list, algorithm: str) -> None:
    """GEMM+AR's grouped inter-node all-reduce on one rank: ``visit`` holds (position j, absolute
    chunk, its owned tiles) of whole groups in :func:`_rail.chunk_order` order, so position j of group
    gi = j // N has node offset ``_rail.group_offsets(N)[j % N]`` and the last of every group is the own chunk.

    Signals (indexed by position, so every node runs node 0's queues): ``chunk_ready[j]`` a
    chunk's node sums are in PART (intra, or compute at G = 1); ``arrived[j]`` / ``rs[j]`` a
    reduce-scatter part landed in RECV; ``staged[j]`` a ring hop's sum is in STAGE; ``fin[j]`` a
    chunk's final sum is in FIN (bumped by each tile summed here, or once by the put that brought it).
    The SEND queue runs each group's reduce-scatter, then the previous group's all-gather, so the
    network keeps one group of sums in flight while the last one spreads."""
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
            fin_to_out(x, [rank], chunk, (Wait(sig("fin", j), len(chunk) if i == nodes - 1 else 1),))

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


def shared_exchange(x: RankNet, tiles: list, slots: int) -> None:
    """Twoshot over the owner's first ``slots`` slots as N row pieces of PART, piece p summed on node
    p: for an owner's share too small for N chunks. Signals: ``group_ready`` (each tile's node sum in
    PART), ``parrived`` (a piece landed in RECV), ``pown`` (this node's piece summed into FIN) and
    ``pfin`` (another node's final piece landed in FIN); the tiles go out once all N are there."""
    sb, w, c, rank, regs = x.sb, x.w, x.c, x.rank, x.regs
    g, nodes, node, local = c.gpus_per_node, c.nodes, c.node_of(rank), c.local_of(rank)
    pieces = split_rows(0, slots * w.tile_m, nodes)

    def rows(buf: str, at: int, p: int, section: int = 0) -> Region:
        base = section * regs.slots * w.tile_m
        return Region(buf, at, base + pieces[p][0], base + pieces[p][1], 0, w.tile_n)

    ready = Wait(Signal(rank, "group_ready"), len(tiles))  # chunk numbers by node offset: node-symmetric
    for d in range(1, nodes):
        p = (node + d) % nodes
        sb.add(rank, Role.SEND, Op.PUT, waits=(ready,), chunk=d, reads=(rows("PART", rank, p),),
               writes=(rows("RECV", c.rank(p, local), p, node),), signals=(Signal(c.rank(p, local), "parrived"),),
               label=f"piece {p} sums to node {p}")
    sb.add(rank, Role.RECV, Op.REDUCE, waits=(Wait(Signal(rank, "parrived"), nodes - 1), ready),
           reads=(rows("PART", rank, node),) + tuple(rows("RECV", rank, node, m) for m in range(nodes) if m != node),
           writes=(rows("FIN", rank, node),), signals=(Signal(rank, "pown"),), label=f"piece {node} sum")
    for d in range(1, nodes):
        peer = c.rank((node + d) % nodes, local)
        sb.add(rank, Role.SEND, Op.PUT, waits=(Wait(Signal(rank, "pown"), 1),), chunk=nodes,
               reads=(rows("FIN", rank, node),), writes=(rows("FIN", peer, node),), signals=(Signal(peer, "pfin"),),
               label=f"piece {node} final to node {(node + d) % nodes}")
    if g == 1:  # no intra role: the receive role copies the final sums out
        fin_to_out(x, [rank], tiles, shared_final(rank, nodes))


def shared_final(rank: int, nodes: int) -> tuple[Wait, Wait]:
    """The waits after which every final piece of a shared exchange is in the rank's FIN."""
    return (Wait(Signal(rank, "pown"), 1), Wait(Signal(rank, "pfin"), nodes - 1))


def fin_to_out(x: RankNet, peers: list[int], tiles: list, waits: tuple[Wait, ...]) -> None:
    """Each tile's final sum from the rank's FIN into OUT on ``peers`` (self first) once ``waits``
    hold: the intra role's broadcast, or at G = 1 (``peers`` = the rank) the receive role's copy."""
    sb, w, rank, regs = x.sb, x.w, x.rank, x.regs
    g = x.c.gpus_per_node
    role, label = (Role.INTRA, "tile {} bcast") if g > 1 else (Role.RECV, "tile {} out")
    for run in runs(tiles, stride=g):
        t = run[0]
        sb.add(rank, role, Op.COPY, waits=waits, reads=tuple(regs.slot("FIN", rank, t) for _ in peers),
               writes=tuple(regs.tile("OUT", p, t) for p in peers), signals=tuple(x.out_done(p) for p in peers),
               label=label, count=len(run),
               step=Step(((0, w.tile_m, 0),) * len(peers) + ((0, 0, t.cols * g),) * len(peers),
                         waits=(0,) * len(waits), label=(t.index, g)))
