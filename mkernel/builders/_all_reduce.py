"""The GEMM+AllReduce baseline's all-reduce, NCCL-style and declared in the IR over the ring
collectives of :mod:`._collectives`: the flat ring, or NCCL's hierarchical form (in the node, over
the rail, in the node). Both reduce the baseline's partial sums ``P`` into ``OUT`` on every rank,
receiving into ``IN1`` / ``IN2`` and staging network hops in ``STAGE``, and bump ``out_done`` on a
rank for each of its ``OUT`` rows that is final (a drain task waits for them all)."""
from __future__ import annotations

from ..cluster import Cluster
from ..ir import DTYPE_BYTES, Op, Region, Role, Signal, Wait
from ..problems import Workload
from ..schedule_builder import ScheduleBuilder
from . import _collectives as coll
from ._tiling import baseline_rows_per_chunk, split_rows


def ring(sb: ScheduleBuilder, w: Workload, c: Cluster) -> None:
    """NCCL's flat ring all-reduce over every rank: a ring reduce-scatter, then a ring all-gather."""
    coll.flat_ring_launch(sb, c, w, "allreduce", coll.nccl_call(w, "all_reduce", w.m * w.n * DTYPE_BYTES[w.dtype]))
    if not sb.builds():
        return
    slices = [s for s in split_rows(0, w.m, min(w.baseline_channels, w.m // c.world)) if s[1] > s[0]]
    ring = coll.flat_ring(c, w, [split_rows(r0, r1, c.world) for r0, r1 in slices], w.n)
    coll.reduce_scatter(sb, ring, src="P", inbuf="IN1", stage="STAGE",
                        dest=lambda r, r0, r1: Region("OUT", r, r0, r1, 0, w.n),
                        done=lambda r, lane: (Signal(r, "rs_done", lane), Signal(r, "out_done")))
    counts = {(r, lane): sb.bumped(Signal(r, "rs_done", lane)) for r in sb.ranks() for lane in range(len(slices))}
    coll.all_gather(sb, ring, buf="OUT", ready=lambda r, lane, _b: (Wait(Signal(r, "rs_done", lane), counts[(r, lane)]),),
                    arrived_extra=lambda r, lane: (Signal(r, "out_done"),))
    coll.drain(sb, "out_done")


def hierarchical(sb: ScheduleBuilder, w: Workload, c: Cluster) -> None:
    """Ring reduce-scatter in the node, ring all-reduce over the rail, ring all-gather in the node.

    Rows are dealt to ``baseline_channels`` lanes (NCCL channels), each an independent ring; a
    lane's next phase starts when that lane's previous phase has finished on the rank.
    """
    g, nodes = c.gpus_per_node, c.nodes
    ch = w.baseline_channels
    sb.launch("allreduce", {Role.INTRA: ch if g > 1 else 0, Role.SEND: coll.network_sms(ch, nodes),
                            Role.RECV: coll.network_sms(ch, nodes)},
              coll.nccl_call(w, "all_reduce", w.m * w.n * DTYPE_BYTES[w.dtype]))
    if not sb.builds():
        return
    rows_per_chunk = baseline_rows_per_chunk(w.baseline_chunk_kib, w.n, DTYPE_BYTES[w.dtype])
    slices = [s for s in split_rows(0, w.m, min(ch, w.m // c.world)) if s[1] > s[0]]
    lanes = [split_rows(r0, r1, g) for r0, r1 in slices]  # lanes[lane][local] = rows local owns

    def sig(name: str):
        return lambda r, lane: (Signal(r, name, lane),)

    def wait_all(name: str, ranks):
        counts = {(r, lane): sb.bumped(Signal(r, name, lane)) for r in ranks for lane in range(len(lanes))}
        return lambda r, lane, _block=0: (Wait(Signal(r, name, lane), counts[(r, lane)]),)

    def both(*fns):
        return lambda r, lane: sum((f(r, lane) for f in fns), ())

    def out_done(r: int, _lane: int = 0) -> tuple:
        return (Signal(r, "out_done"),)

    if g > 1:  # 1. reduce-scatter inside each node: rank `local` ends with block `local` of each lane
        for node in sb.nodes():
            ring = coll.Ring(c.node_ranks(node), lanes, w.n, rows_per_chunk, False, "n")
            target = "IN1" if nodes > 1 else "OUT"
            coll.reduce_scatter(sb, ring, src="P", inbuf="IN1", stage="STAGE",
                                dest=lambda r, r0, r1, target=target: Region(target, r, r0, r1, 0, w.n),
                                done=sig("l1_done") if nodes > 1 else both(sig("block_done"), out_done))
    if nodes > 1:  # 2. all-reduce of each owned block among rail peers (ring RS + ring AG)
        for local in range(g):
            rail = c.rail(local)
            ring = coll.Ring(rail, [split_rows(*blocks[local], nodes) for blocks in lanes], w.n,
                             rows_per_chunk, True, f"rail{local}")
            coll.reduce_scatter(sb, ring, src="IN1" if g > 1 else "P", inbuf="IN2", stage="STAGE",
                                dest=lambda r, r0, r1: Region("OUT", r, r0, r1, 0, w.n),
                                ready=wait_all("l1_done", rail) if g > 1 else coll.none,
                                done=both(sig("l2_done"), sig("block_done"), out_done))
            coll.all_gather(sb, ring, buf="OUT", ready=wait_all("l2_done", rail),
                            arrived_extra=both(sig("block_done"), out_done))
    if g > 1:  # 3. all-gather inside each node
        for node in sb.nodes():
            ring = coll.Ring(c.node_ranks(node), lanes, w.n, rows_per_chunk, False, "n")
            coll.all_gather(sb, ring, buf="OUT", ready=wait_all("block_done", ring.ranks), arrived_extra=out_done)
    role = Role.INTRA if g > 1 else Role.RECV
    for rank in sb.ranks():
        done = Signal(rank, "out_done")
        sb.add(rank, role, Op.NOP, waits=(Wait(done, sb.bumped(done)),), label="drain")
