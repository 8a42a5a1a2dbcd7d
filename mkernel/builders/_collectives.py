"""NCCL-style ring collectives, declared in the IR, for the unfused baselines.

A ring over ``ranks`` runs several independent *lanes* (NCCL's channels), each over its own rows.
A lane splits its rows into one block per ring position; the block at position ``b`` ends on
``ranks[b]``. Each block is cut into chunks of ``rows_per_chunk`` rows and every chunk travels its
own path, so steps pipeline as NCCL's do, and lanes multiply the chunks in flight per step.

Within a node a hop is one INTRA task that reduces what arrived with the local contribution and
stores it straight into the next rank's buffer (NCCL's reduce-copy). Across nodes the reducer
(RECV role) first writes a local staging buffer, and a SEND task puts it to the next node.

Tasks are emitted in wavefront order (see :func:`_wavefront`): every wait is for a task that
sits at an earlier step in its own queue, so the rings cannot deadlock whatever the SM budget.

Signals and network chunks are named by what a rank sees of a chunk (lane, chunk number, hop), never
by absolute ring positions, so every node of a rail or flat ring runs the same queues under the node
shift, and a build of the first nodes alone (``ScheduleBuilder.first_nodes``) is exact.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..ir import Library, Op, Region, Role, Signal, Wait
from ..schedule_builder import ScheduleBuilder
from ._tiling import baseline_rows_per_chunk, chunk_rows


@dataclass(frozen=True, slots=True)
class Ring:
    """One ring collective's placement: its ranks, row blocks, width and link tier."""

    ranks: list[int]
    lanes: list[list[tuple[int, int]]]  # per lane, the rows owned in the end by ranks[b]
    cols: int
    rows_per_chunk: int
    network: bool  # True: ranks are rail peers on different nodes
    tag: str  # names this ring's signals
    gpus_per_node: int = 0  # > 0: a flat ring; each hop's tier follows whether it leaves the node

    def crosses(self, a: int, b: int) -> bool:
        """Whether the hop from rank a to rank b goes over the network."""
        if self.gpus_per_node:
            return a // self.gpus_per_node != b // self.gpus_per_node
        return self.network

    def chunks(self) -> list[tuple[int, int, int, int, int]]:
        """(lane, chunk_no, block, row0, row1), chunk index first, then lane, then block."""
        per = [[chunk_rows(r0, r1, self.rows_per_chunk) for r0, r1 in blocks] for blocks in self.lanes]
        deepest = max((len(p) for blocks in per for p in blocks), default=0)
        out = []
        for c in range(deepest):
            for lane, blocks in enumerate(per):
                for b, parts in enumerate(blocks):
                    if c < len(parts):
                        out.append((lane, c, b) + parts[c])
        return out


    def key(self, lane: int, c: int, hop: int) -> int:
        """The index of a chunk's signals and network chunk at ``hop``: unique on each rank (one
        block of a lane reaches a rank at each hop) and the same on every node."""
        return (c * len(self.lanes) + lane) * len(self.ranks) + hop

WaitsFor = Callable[[int, int, int], tuple[Wait, ...]]  # (rank, lane, block) -> waits
SignalsFor = Callable[[int, int], tuple[Signal, ...]]  # (rank, lane) -> signals


def none(*_args) -> tuple:
    """No extra waits or signals."""
    return ()


def reduce_scatter(sb: ScheduleBuilder, ring: Ring, *, src: str, inbuf: str, stage: str,
                   dest: Callable[[int, int, int], Region], ready: WaitsFor = none,
                   done: SignalsFor = none) -> None:
    """Sum ``src`` over the ring; block b's sum lands in ``dest(ranks[b], row0, row1)``.

    ``ready(rank, lane, block)`` are waits that must hold before ``src`` rows of that lane's block
    may be read on that rank; ``done(rank, lane)`` are extra signals bumped on the owner by each
    final reduce.
    """
    g = len(ring.ranks)
    if g < 2:
        return
    for lane, c, b, r0, r1, h in _wavefront(sb, ring, g, first=1):
        path = [ring.ranks[(b + 1 + i) % g] for i in range(g)]
        rank = path[h]
        net_in = h > 0 and ring.crosses(path[h - 1], rank)
        net_out = h < g - 1 and ring.crosses(rank, path[h + 1])
        reducer = Role.RECV if net_in else Role.INTRA

        def reg(buf: str, at: int) -> Region:
            return Region(buf, at, r0, r1, 0, ring.cols)

        def arrived(at: int, hop: int) -> Signal:
            return Signal(at, f"{ring.tag}.rs", ring.key(lane, c, hop))

        waits = ready(rank, lane, b) + ((Wait(arrived(rank, h), 1),) if h > 0 else ())
        label = f"{ring.tag} rs lane {lane} chunk {c} block {b} hop {h}"
        if h == g - 1:
            sb.add(rank, reducer, Op.REDUCE, reads=(reg(src, rank), reg(inbuf, rank)),
                   writes=(dest(rank, r0, r1),), waits=waits, signals=done(rank, lane), label=label)
        elif h == 0 or not net_out:
            sources = (reg(src, rank),) if h == 0 else (reg(src, rank), reg(inbuf, rank))
            target = reg(inbuf, path[h + 1])
            if net_out:
                sb.add(rank, Role.SEND, Op.PUT, reads=sources, writes=(target,), waits=waits,
                       signals=(arrived(path[h + 1], h + 1),), chunk=ring.key(lane, c, h), label=label)
            else:
                op = Op.COPY if h == 0 else Op.REDUCE
                sb.add(rank, Role.INTRA, op, reads=sources, writes=(target,), waits=waits,
                       signals=(arrived(path[h + 1], h + 1),), label=label)
        else:
            staged = Signal(rank, f"{ring.tag}.stage", ring.key(lane, c, h))
            sb.add(rank, reducer, Op.REDUCE, reads=(reg(src, rank), reg(inbuf, rank)),
                   writes=(reg(stage, rank),), waits=waits, signals=(staged,), label=label)
            sb.add(rank, Role.SEND, Op.PUT, reads=(reg(stage, rank),), writes=(reg(inbuf, path[h + 1]),),
                   waits=(Wait(staged, 1),), signals=(arrived(path[h + 1], h + 1),),
                   chunk=ring.key(lane, c, h), label=label)


def _wavefront(sb: ScheduleBuilder, ring: Ring, hops: int, first: int) -> list[tuple]:
    """(lane, chunk no, block, row0, row1, hop) for the ranks ``sb`` emits, ordered by step =
    chunk no + hop, then chunk no, lane and hop.

    This is NCCL's step order: at step s each rank works on the chunks that entered the ring s
    hops ago, so no SM blocks on a deep chain while an earlier-ready hop waits behind it. At hop h
    block b sits on ring position ``(b + first + h) % len(ranks)``; items are enumerated per
    emitted position, so a build of the first nodes never walks the other nodes' hops.
    """
    g = len(ring.ranks)
    by_block: dict[int, list] = {}
    for lane, c, b, r0, r1 in ring.chunks():
        by_block.setdefault(b, []).append((lane, c, r0, r1))
    items = []
    for pos, rank in enumerate(ring.ranks):
        if sb.emits(rank):
            for h in range(hops):
                b = (pos - first - h) % g
                items.extend((c + h, c, lane, h, pos, b, r0, r1) for lane, c, r0, r1 in by_block.get(b, ()))
    items.sort()
    return [(lane, c, b, r0, r1, h) for _, c, lane, h, _, b, r0, r1 in items]


def all_gather(sb: ScheduleBuilder, ring: Ring, *, buf: str, ready: WaitsFor = none,
               arrived_extra: SignalsFor = none) -> None:
    """Copy block b of ``buf`` from ``ranks[b]`` to every ring rank, forwarding along the ring.

    ``ready(owner, lane, block)`` must hold before the owner's block may be read;
    ``arrived_extra(rank, lane)`` are signals bumped on each receiver when a chunk lands there.
    """
    g = len(ring.ranks)
    if g < 2:
        return
    for lane, c, b, r0, r1, h in _wavefront(sb, ring, g - 1, first=0):
        rank, nxt = ring.ranks[(b + h) % g], ring.ranks[(b + h + 1) % g]
        net = ring.crosses(rank, nxt)
        waits = ready(rank, lane, b) if h == 0 else (Wait(Signal(rank, f"{ring.tag}.ag", ring.key(lane, c, h)), 1),)
        sb.add(rank, Role.SEND if net else Role.INTRA, Op.PUT if net else Op.COPY,
               reads=(Region(buf, rank, r0, r1, 0, ring.cols),),
               writes=(Region(buf, nxt, r0, r1, 0, ring.cols),), waits=waits,
               signals=(Signal(nxt, f"{ring.tag}.ag", ring.key(lane, c, h + 1)),) + arrived_extra(nxt, lane),
               chunk=ring.key(lane, c, h) if net else -1, label=f"{ring.tag} ag lane {lane} chunk {c} block {b} hop {h}")


def hierarchical_all_gather(sb: ScheduleBuilder, c, *, buffers: tuple[str, ...], slot_rows: int, cols: int,
                            parts: int, rows_per_chunk: int, own: Signal | Callable[[int], Signal]) -> None:
    """NCCL's hierarchical all-gather of per-rank slots: a ring among rail peers, then a ring in the
    node, for each buffer; then each rank drains until everything sent to it has landed.

    Rank q's slot is rows ``[q * slot_rows, (q + 1) * slot_rows)`` of every buffer; ``own(rank)`` is
    the signal (bumped once) that the rank's own slot is in place. Each slot is cut in ``parts``
    row ranges, one lane each (NCCL's channels).
    """
    from ._tiling import split_rows

    g, nodes = c.gpus_per_node, c.nodes
    own_of = own if callable(own) else (lambda _r: own)

    def slot(q: int) -> list[tuple[int, int]]:
        return split_rows(q * slot_rows, (q + 1) * slot_rows, parts)

    def own_ready(r: int, *_):
        return (Wait(own_of(r), 1),)

    for buf in buffers:
        if nodes > 1:  # rail peers gather each other's slots
            for local in range(g):
                lanes = [[slot(c.rank(m, local))[p] for m in range(nodes)] for p in range(parts)]
                all_gather(sb, Ring(c.rail(local), lanes, cols, rows_per_chunk, True, f"{buf}rail{local}"), buf=buf,
                           ready=own_ready,
                           arrived_extra=lambda r, lane, b=buf: (Signal(r, f"{b}rail", lane), Signal(r, "in_done")))
        if g > 1:  # each node gathers its ranks' collections
            counts = {(r, p): sb.bumped(Signal(r, f"{buf}rail", p)) for r in sb.ranks() for p in range(parts)}

            def ready(r: int, lane: int, _block: int, buf=buf, counts=counts) -> tuple:
                dm, p = divmod(lane, parts)  # lane dm * parts + p: rows of node (own + dm)'s slots, part p
                if dm == 0:
                    return own_ready(r)
                return (Wait(Signal(r, f"{buf}rail", p), counts[(r, p)]),)  # rows that came over rail lane p

            for node in sb.nodes():  # lanes in node order from this node (the same on every node)
                lanes = [[slot(c.rank((node + dm) % nodes, b))[p] for b in range(g)]
                         for dm in range(nodes) for p in range(parts)]
                all_gather(sb, Ring(c.node_ranks(node), lanes, cols, rows_per_chunk, False, f"{buf}n"),
                           buf=buf, ready=ready, arrived_extra=lambda r, lane: (Signal(r, "in_done"),))
    drain(sb, "in_done")


def drain(sb: ScheduleBuilder, name: str, role: Role = Role.INTRA) -> None:
    """On each rank, a task that ends the launch only when every bump of ``name`` there has landed."""
    for rank in sb.ranks():
        done = Signal(rank, name)
        if sb.bumped(done):
            sb.add(rank, role, Op.NOP, waits=(Wait(done, sb.bumped(done)),), label="drain")


REFERENCE_SMS = 132  # builders' default budgets are per GPU of this many SMs (an H100 or H200)


def role_budget(w, c, defaults: dict[Role, int]) -> dict[Role, int]:
    """SMs per role: the builder's defaults for the communication roles (scaled down on a GPU, or a
    rank's share of one, with fewer than REFERENCE_SMS), the workload's overrides, and every SM left
    to compute (unless compute is overridden too)."""
    scale = min(1.0, c.gpu.sms / REFERENCE_SMS)
    want = {role: max(1, round(n * scale)) if n else 0 for role, n in defaults.items()}
    for role in want:
        if w.sm_override(role) is not None:
            want[role] = w.sm_override(role)
    want[Role.COMPUTE] = w.sm_override(Role.COMPUTE) or c.gpu.sms - sum(want.values())
    return want


def flat_ring(c, w, blocks: list[list[tuple[int, int]]], cols: int, tag: str = "ring") -> Ring:
    """One ring over every rank in rank order (NCCL's flat ring): hops inside a node go over NVLink,
    the hop out of each node over the network. ``blocks[lane][q]``: the rows rank q owns in the end."""
    from ..ir import DTYPE_BYTES

    rows_per_chunk = baseline_rows_per_chunk(w.baseline_chunk_kib, cols, DTYPE_BYTES[w.dtype])
    return Ring(list(range(c.world)), blocks, cols, rows_per_chunk, False, tag, gpus_per_node=c.gpus_per_node)


def network_sms(channels: int, nodes: int) -> int:
    """SMs of each network role (send, receive) of an NCCL-style baseline with ``channels``
    channels: a quarter of them, at least one, where there is a network (none on one node)."""
    return max(1, channels // 4) if nodes > 1 else 0


def flat_ring_launch(sb: ScheduleBuilder, c, w, name: str, library: Library | None = None) -> None:
    ch = w.baseline_channels
    net = network_sms(ch, c.nodes)
    sb.launch(name, {Role.INTRA: ch, Role.SEND: net, Role.RECV: net}, library)


def nccl_call(w, kind: str, nbytes: int) -> Library | None:
    """The NCCL call a baseline's collective launch stands for (``nbytes`` per rank, nccl-tests'
    sizes), so a timing run takes NCCL's time for it (:mod:`mkernel.sim.library`); None when the
    workload times the declared rings instead (``collectives = "ir"``)."""
    return Library(kind, int(nbytes)) if w.collectives == "nccl" else None
