"""AllGather + GEMM (column-parallel tensor parallelism), fused and unfused.

Unfused equivalent, on every rank r of the world (S = m / world rows per shard)::

    A = all_gather(A_r)                  # A_r: S x k, the gathered A: m x k (shard q at rows q*S)
    out_r = A @ B_r                      # B_r: k x n (this rank's column block), out_r: m x n

Fused schedule (design §6)::

    send    | at launch: put the local shard, in chunks of CHUNK_ROWS rows, once to each other node
            | (to the rail peer there); or, with ``forward = "ring"``, to the next node only, relaying
            | what the previous node's rail peer sends (nodes - 1 hops)
    intra   | store the local shard into every node peer; then forward each shard that arrives
            | from another node to the node peers (unicast peer stores, no multicast), one task
            | per chunk and peer so the role's SMs share the work
    compute | tiles in input-availability order: the local shard (read in place), the node's
            | shards, then the remote shards, each tile waiting for the chunks it reads

Compute tiles never cross a shard, so a tile waits only for chunks of one shard. Every wait is on
a task that no compute or intra task waits behind, so no SM budget deadlocks.

Baseline ("nccl_hier_ag+gemm"): an NCCL-style hierarchical all-gather (a ring all-gather among rail
peers, then a ring all-gather in the node) in one launch, then the GEMM on all SMs.
"""
from __future__ import annotations

import math

import numpy as np

from ..cluster import Cluster
from ..errors import ProblemError
from ..ir import DTYPE_BYTES, BufferKind, Op, Region, Role, Schedule, Signal, Wait, paused_gc
from ..problems import Workload
from ..schedule_builder import ScheduleBuilder
from . import _collectives as coll
from . import _rail as rail
from ._tiling import baseline_rows_per_chunk, chunk_rows, grid_runs, row_step, split_rows

CHUNK_ROWS = 128  # rows of A per network chunk (design §6)
DEFAULT_INTRA_SMS = 32  # per 132 SMs: measured and simulated best on an H200 pair and 2x8 (2026-11-30-nvlink.md)
DEFAULT_SEND_SMS = 2


def check(w: Workload, c: Cluster) -> None:
    """Refuse shapes this op cannot split, with the reason."""
    w.require_positive("m", "n", "k", "tile_m", "tile_n")
    if w.m % c.world:
        raise ProblemError(f"ag_gemm gathers one m / world row shard from each of the {c.world} ranks, so m must "
                           f"be a multiple of {c.world}, got {w.m}")
    if _roles(w, c)[Role.COMPUTE] < 1:
        raise ProblemError(f"ag_gemm leaves no compute SMs of {c.gpu.sms}")


def flops_per_gpu(w: Workload, c: Cluster) -> float:
    return 2.0 * w.m * w.n * w.k


def _roles(w: Workload, c: Cluster) -> dict[Role, int]:
    return coll.role_budget(w, c, {Role.INTRA: DEFAULT_INTRA_SMS if c.gpus_per_node > 1 else 0,
                                   Role.SEND: DEFAULT_SEND_SMS if c.nodes > 1 else 0})


def _inputs(sb: ScheduleBuilder, w: Workload, c: Cluster) -> int:
    shard = w.m // c.world
    sb.buffer("A", shard, w.k, w.dtype, BufferKind.INPUT)
    sb.buffer("B", w.k, w.n, w.dtype, BufferKind.INPUT)
    sb.buffer("AG", w.m, w.k, w.dtype)  # the gathered A (the own shard is read in place from A)
    sb.buffer("OUT", w.m, w.n, w.dtype, BufferKind.OUTPUT)
    return shard


def _source_order(c: Cluster, rank: int) -> list[int]:
    """Shards in the order they become available on ``rank``: own, node peers, then other nodes in
    the order their shards arrive (node - 1 first: a ring relays from there, and direct sends go to
    node + 1 first), each node's rail peer first since it arrives over the network directly."""
    node, local = c.node_of(rank), c.local_of(rank)
    g = c.gpus_per_node
    return [c.rank((node - dn) % c.nodes, (local + dl) % g) for dn in range(c.nodes) for dl in range(g)]


@paused_gc()
def build(w: Workload, c: Cluster, first_nodes: int = 0, grouped: bool = False, local_fold: bool = False) -> Schedule:
    """The fused schedule (only the first nodes' tasks with ``first_nodes``, and only their local rank
    0's with ``local_fold``: see ScheduleBuilder)."""
    check(w, c)
    g, nodes = c.gpus_per_node, c.nodes
    sb = ScheduleBuilder("ag_gemm", "fused", c.world, g, c.gpu.sms, first_nodes=first_nodes, grouped=grouped,
                         local_fold=local_fold)
    S = _inputs(sb, w, c)
    chunks = chunk_rows(0, S, CHUNK_ROWS)
    sb.rotating = {"landed": len(chunks)}  # a shard's relative rank, then its chunk
    sb.launch("fused", _roles(w, c))

    def rows(buf: str, rank: int, q: int, r0: int, r1: int) -> Region:
        """Rows [r0, r1) of shard q in ``buf`` on ``rank`` (A holds only the own shard)."""
        base = 0 if buf == "A" else q * S
        return Region(buf, rank, base + r0, base + r1, 0, w.k)

    def landed(rank: int, q: int, ci: int) -> Signal:
        return Signal(rank, "landed", c.relative(q, rank) * len(chunks) + ci)

    for rank in sb.ranks():
        node, local = c.node_of(rank), c.local_of(rank)
        peers = c.node_ranks_from(rank)[1:]
        if nodes > 1 and rail.choose(w, c) == "ring":  # own shard to the next node; relay what the previous sends
            nxt = c.rank((node + 1) % nodes, local)
            for hop in range(nodes - 1):
                q = c.rank((node - hop) % nodes, local)  # the shard this rank relays at this hop
                for ci, (r0, r1) in enumerate(chunks):
                    sb.add(rank, Role.SEND, Op.PUT, chunk=ci, waits=(Wait(landed(rank, q, ci), 1),) if hop else (),
                           reads=(rows("A" if hop == 0 else "AG", rank, q, r0, r1),),
                           writes=(rows("AG", nxt, q, r0, r1),), signals=(landed(nxt, q, ci),),
                           label=f"shard {q} chunk {ci} to node {(node + 1) % nodes}")
        elif nodes > 1:  # the own shard to each other node's rail peer, first thing
            for dn in range(1, nodes):
                dst = c.rank((node + dn) % nodes, local)
                for ci, (r0, r1) in enumerate(chunks):
                    sb.add(rank, Role.SEND, Op.PUT, reads=(rows("A", rank, rank, r0, r1),),
                           writes=(rows("AG", dst, rank, r0, r1),), signals=(landed(dst, rank, ci),), chunk=ci,
                           label=f"shard {rank} chunk {ci} to node {(node + dn) % nodes}")
        if g > 1:  # one task per (chunk, peer), so the intra SMs share a broadcast
            sources = [(rank, ())] + [  # the own shard, then what rail peers send, in arrival order
                (c.rank((node - dn) % nodes, local), True) for dn in range(1, nodes)]
            for q, forwarded in sources:
                for ci, (r0, r1) in enumerate(chunks):
                    waits = (Wait(landed(rank, q, ci), 1),) if forwarded else ()
                    for p in peers:
                        sb.add(rank, Role.INTRA, Op.COPY, waits=waits,
                               reads=(rows("A" if q == rank else "AG", rank, q, r0, r1),),
                               writes=(rows("AG", p, q, r0, r1),), signals=(landed(p, q, ci),),
                               label=f"shard {q} chunk {ci} to rank {p}")
        for q in _source_order(c, rank):  # compute, in input-availability order
            for run in grid_runs(S, w.n, w.tile_m, w.tile_n):  # a row's tiles read the same chunks
                t = run[0]
                waits = () if q == rank else tuple(
                    Wait(landed(rank, q, ci), 1) for ci, (r0, r1) in enumerate(chunks) if r0 < t.row1 and t.row0 < r1)
                src = rows("A" if q == rank else "AG", rank, q, t.row0, t.row1)
                sb.add(rank, Role.COMPUTE, Op.GEMM, waits=waits, label=f"shard {q} tile {{}}", count=len(run),
                       step=row_step(t), reads=(src, Region("B", rank, 0, w.k, t.col0, t.col1)),
                       writes=(Region("OUT", rank, q * S + t.row0, q * S + t.row1, t.col0, t.col1),))
    return sb.build(flops_per_gpu(w, c))


@paused_gc()
def build_baseline(w: Workload, c: Cluster, first_nodes: int = 0, grouped: bool = False,
                   library_tasks: bool = True, local_fold: bool = False) -> Schedule:
    """An NCCL-style hierarchical all-gather in one launch (without its tasks in a timing build,
    ``library_tasks=False``, whose ``local_fold`` has only local rank 0's tiles: see
    :class:`~mkernel.schedule_builder.ScheduleBuilder`), then the GEMM on all SMs."""
    check(w, c)
    g, nodes = c.gpus_per_node, c.nodes
    name = "nccl_ring_ag+gemm" if w.baseline == "ring" else "nccl_hier_ag+gemm"
    sb = ScheduleBuilder("ag_gemm", name, c.world, g, c.gpu.sms, first_nodes=first_nodes, grouped=grouped,
                         library_tasks=library_tasks, local_fold=local_fold)
    S = _inputs(sb, w, c)
    ch = w.baseline_channels
    sb.launch("allgather", {Role.INTRA: ch if g > 1 else 1, Role.SEND: coll.network_sms(ch, nodes)},
              coll.nccl_call(w, "all_gather", c.world * S * w.k * DTYPE_BYTES[w.dtype]))
    if sb.builds():  # not in a timing build (library_tasks=False): the call's model times it
        _all_gather(sb, w, c, S)
    sb.launch("gemm", {Role.COMPUTE: c.gpu.sms})
    for rank in sb.ranks():
        for run in grid_runs(w.m, w.n, w.tile_m, w.tile_n):
            t = run[0]
            sb.add(rank, Role.COMPUTE, Op.GEMM, label="tile {}", count=len(run), step=row_step(t),
                   writes=(Region("OUT", rank, t.row0, t.row1, t.col0, t.col1),),
                   reads=(Region("AG", rank, t.row0, t.row1, 0, w.k), Region("B", rank, 0, w.k, t.col0, t.col1)))
    return sb.build(flops_per_gpu(w, c))


def _all_gather(sb: ScheduleBuilder, w: Workload, c: Cluster, S: int) -> None:
    """The baseline's all-gather of every rank's ``S``-row shard into AG: NCCL's flat ring, or
    hierarchical (in the node, then over the rail)."""
    g, nodes, ch = c.gpus_per_node, c.nodes, w.baseline_channels
    rows_per_chunk = baseline_rows_per_chunk(w.baseline_chunk_kib, w.k, DTYPE_BYTES[w.dtype])
    parts = max(1, min(S, ch // nodes if g > 1 else ch))
    for rank in sb.ranks():  # the own shard into the gathered buffer
        sb.add(rank, Role.INTRA, Op.COPY, reads=(Region("A", rank, 0, S, 0, w.k),),
               writes=(Region("AG", rank, rank * S, (rank + 1) * S, 0, w.k),), signals=(Signal(rank, "own"),),
               label="own shard")
    if w.baseline == "ring":  # NCCL's flat ring over every rank
        blocks = [[split_rows(q * S, (q + 1) * S, parts)[p] for q in range(c.world)] for p in range(parts)]
        coll.all_gather(sb, coll.flat_ring(c, w, blocks, w.k), buf="AG", ready=lambda r, *_: (Wait(Signal(r, "own"), 1),),
                        arrived_extra=lambda r, lane: (Signal(r, "in_done"),))
        coll.drain(sb, "in_done")
    else:
        coll.hierarchical_all_gather(sb, c, buffers=("AG",), slot_rows=S, cols=w.k, parts=parts,
                                     rows_per_chunk=rows_per_chunk, own=lambda r: Signal(r, "own"))


def make_inputs(w: Workload, c: Cluster, rng: np.random.Generator) -> dict[str, list[np.ndarray]]:
    """Fresh random shards A_r and column blocks B_r (scaled so outputs stay O(1))."""
    scale = 1.0 / math.sqrt(w.k)
    return {"A": [rng.standard_normal((w.m // c.world, w.k), dtype=np.float32) for _ in range(c.world)],
            "B": [(rng.standard_normal((w.k, w.n), dtype=np.float32) * scale).astype(np.float32)
                  for _ in range(c.world)]}
