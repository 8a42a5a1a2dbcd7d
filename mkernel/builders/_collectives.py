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
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..ir import Op, Region, Role, ScheduleBuilder, Signal, Wait
from ._tiling import chunk_rows


@dataclass(frozen=True, slots=True)
class Ring:
    """One ring collective's placement: its ranks, row blocks, width and link tier."""

    ranks: list[int]
    lanes: list[list[tuple[int, int]]]  # per lane, the rows owned in the end by ranks[b]
    cols: int
    rows_per_chunk: int
    network: bool  # True: ranks are rail peers on different nodes
    tag: str  # names this ring's signals

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
    mover = Role.SEND if ring.network else Role.INTRA
    reducer = Role.RECV if ring.network else Role.INTRA
    for gc, lane, b, r0, r1, h in _wavefront(ring, g):
        path = [ring.ranks[(b + 1 + i) % g] for i in range(g)]
        rank = path[h]

        def reg(buf: str, at: int) -> Region:
            return Region(buf, at, r0, r1, 0, ring.cols)

        def arrived(at: int) -> Signal:
            return Signal(at, f"{ring.tag}.rs", gc)

        waits = ready(rank, lane, b) + ((Wait(arrived(rank), 1),) if h > 0 else ())
        label = f"{ring.tag} rs chunk {gc} hop {h}"
        if h == g - 1:
            sb.add(rank, reducer, Op.REDUCE, reads=(reg(src, rank), reg(inbuf, rank)),
                   writes=(dest(rank, r0, r1),), waits=waits, signals=done(rank, lane), label=label)
        elif h == 0 or not ring.network:
            sources = (reg(src, rank),) if h == 0 else (reg(src, rank), reg(inbuf, rank))
            target = reg(inbuf, path[h + 1])
            if ring.network:
                sb.add(rank, mover, Op.PUT, reads=sources, writes=(target,), waits=waits,
                       signals=(arrived(path[h + 1]),), chunk=gc, label=label)
            else:
                op = Op.COPY if h == 0 else Op.REDUCE
                sb.add(rank, mover, op, reads=sources, writes=(target,), waits=waits,
                       signals=(arrived(path[h + 1]),), label=label)
        else:
            staged = Signal(rank, f"{ring.tag}.stage", gc)
            sb.add(rank, reducer, Op.REDUCE, reads=(reg(src, rank), reg(inbuf, rank)),
                   writes=(reg(stage, rank),), waits=waits, signals=(staged,), label=label)
            sb.add(rank, mover, Op.PUT, reads=(reg(stage, rank),), writes=(reg(inbuf, path[h + 1]),),
                   waits=(Wait(staged, 1),), signals=(arrived(path[h + 1]),), chunk=gc, label=label)


def _wavefront(ring: Ring, hops: int):
    """(global chunk, lane, block, row0, row1, hop) ordered by step = chunk no + hop.

    This is NCCL's step order: at step s each rank works on the chunks that entered the ring s
    hops ago, so no SM blocks on a deep chain while an earlier-ready hop waits behind it.
    """
    items = [(gc, lane, b, r0, r1, h, c + h)
             for gc, (lane, c, b, r0, r1) in enumerate(ring.chunks()) for h in range(hops)]
    items.sort(key=lambda it: (it[6], it[0]))
    return [it[:6] for it in items]


def all_gather(sb: ScheduleBuilder, ring: Ring, *, buf: str, ready: WaitsFor = none,
               arrived_extra: SignalsFor = none) -> None:
    """Copy block b of ``buf`` from ``ranks[b]`` to every ring rank, forwarding along the ring.

    ``ready(owner, lane, block)`` must hold before the owner's block may be read;
    ``arrived_extra(rank, lane)`` are signals bumped on each receiver when a chunk lands there.
    """
    g = len(ring.ranks)
    if g < 2:
        return
    role = Role.SEND if ring.network else Role.INTRA
    op = Op.PUT if ring.network else Op.COPY
    for gc, lane, b, r0, r1, h in _wavefront(ring, g - 1):
        path = [ring.ranks[(b + i) % g] for i in range(g)]
        rank, nxt = path[h], path[h + 1]
        waits = ready(rank, lane, b) if h == 0 else (Wait(Signal(rank, f"{ring.tag}.ag", gc), 1),)
        sb.add(rank, role, op, reads=(Region(buf, rank, r0, r1, 0, ring.cols),),
               writes=(Region(buf, nxt, r0, r1, 0, ring.cols),), waits=waits,
               signals=(Signal(nxt, f"{ring.tag}.ag", gc),) + arrived_extra(nxt, lane),
               chunk=gc if ring.network else -1, label=f"{ring.tag} ag chunk {gc} hop {h}")
