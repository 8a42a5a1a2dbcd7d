"""GEMM + ReduceScatter (row-parallel tensor parallelism), fused and unfused.

Unfused equivalent, on every rank r of the world (``k`` is the per-rank K_local)::

    C_r = A_r @ B_r                          # A_r: m x k, B_r: k x n
    out_r = reduce_scatter(C_r, sum)[r]      # rank r ends with rows [r*R, (r+1)*R) of sum_r C_r, R = m / world

Fused schedule (design §6). Rank (node n, local l) is the *node owner* of every output block whose
final owner has local index l: it reduces its node's partials of those blocks, sends each remote
block's node sum to that block's owner (its rail peer in the other node), and adds the other nodes'
sums of its own block::

    compute | every tile of every block -> P, remote nodes' blocks first; signal contrib on the node owner
    intra   | node owner: wait contrib = G, pull the G partials over NVLink, sum -> SEND (remote block)
            |             or PART (own block; OUT directly on one node)
    send    | node owner: wait a chunk of `chunk_tiles` sums, put it to the block's owner (one message)
    recv    | owner: wait the chunk from all N-1 nodes and its own node's sums, add -> OUT

SEND and RECV are tile-major: each tile has its own slot of tile_m x tile_n (edge tiles use part
of it), so a chunk of consecutive tiles is one contiguous range of memory and goes out as one
network message (RDMA writes are contiguous); a put moves whole slots, padding included.
With G = 1 the compute role writes SEND and PART itself. Every wait targets work that is earlier
in its queue or in a queue with no waits back, so no SM budget deadlocks.

``Workload.node_reduce = "push"`` replaces the node owner's pulls with pushes: each rank's intra role
reduce-adds its partial of a tile into the owner's (:mod:`._gemm_rs_push`, its timeline there); the
network roles stay as above.

Baseline ("gemm+nccl_hier_rs"): one GEMM launch on all SMs, then an NCCL-style hierarchical
reduce-scatter: a ring reduce-scatter in the node (rank l ends with its node's sum of every block
owned by local l), then a ring reduce-scatter among rail peers.
"""
from __future__ import annotations

import math

import numpy as np

from ..cluster import Cluster
from ..errors import ProblemError
from ..ir import DTYPE_BYTES, BufferKind, Op, Region, Role, Schedule, Signal, Step, Wait, paused_gc
from ..problems import NODE_REDUCES, Workload
from ..schedule_builder import ScheduleBuilder
from . import _auto as auto
from . import _collectives as coll
from . import _gemm_rs_push as push
from . import _rail as rail
from ._tiling import baseline_rows_per_chunk, batches, grid_runs, row_step, runs, split_rows, tile_grid

DEFAULT_SEND_SMS = 2
DEFAULT_RECV_SMS = 8


def check(w: Workload, c: Cluster) -> None:
    """Refuse shapes this op cannot split, with the reason."""
    w.require_positive("m", "n", "k", "tile_m", "tile_n", "chunk_tiles")
    if w.node_reduce not in NODE_REDUCES:
        raise ProblemError(f"gemm_rs: node_reduce={w.node_reduce!r}; allowed: {', '.join(NODE_REDUCES)}")
    if w.m % c.world:
        raise ProblemError(f"gemm_rs gives every one of the {c.world} ranks m / world rows, so m must be a "
                           f"multiple of {c.world}, got {w.m}")
    if _roles(w, c)[Role.COMPUTE] < 1:
        raise ProblemError(f"gemm_rs leaves no compute SMs of {c.gpu.sms}")


def flops_per_gpu(w: Workload, c: Cluster) -> float:
    return 2.0 * w.m * w.n * w.k


def _roles(w: Workload, c: Cluster) -> dict[Role, int]:
    send = DEFAULT_SEND_SMS if c.nodes > 1 else 0
    recv = DEFAULT_RECV_SMS if c.nodes > 1 else 0
    split = push.intra_sms if w.node_reduce == "push" else auto.gemm_rs_intra_sms  # per shape: Workload.split
    intra = split(w, c, send, recv) if c.gpus_per_node > 1 else 0
    return coll.role_budget(w, c, {Role.INTRA: intra, Role.SEND: send, Role.RECV: recv})


def _inputs(sb: ScheduleBuilder, w: Workload, c: Cluster) -> int:
    sb.buffer("A", w.m, w.k, w.dtype, BufferKind.INPUT)
    sb.buffer("B", w.k, w.n, w.dtype, BufferKind.INPUT)
    rows = w.m // c.world
    sb.buffer("OUT", rows, w.n, w.dtype, BufferKind.OUTPUT)
    return rows


@paused_gc()
def build(w: Workload, c: Cluster, first_nodes: int = 0, grouped: bool = False, local_fold: bool = False) -> Schedule:
    """The fused schedule (only the first nodes' tasks with ``first_nodes``, and only their local rank
    0's with ``local_fold``: see ScheduleBuilder)."""
    check(w, c)
    g, nodes = c.gpus_per_node, c.nodes
    pushed = g > 1 and w.node_reduce == "push"
    algorithm = rail.choose(w, c)
    # the order a node visits the blocks of other nodes, own block last: direct, nearest first; ring,
    # the block it starts (node - 1's), then the one that arrives next, as the ring carries them
    offsets = [*range(nodes - 1, 0, -1), 0] if algorithm == "ring" else [*range(1, nodes), 0]
    sb = ScheduleBuilder("gemm_rs", "fused", c.world, g, c.gpu.sms, first_nodes=first_nodes, grouped=grouped,
                         local_fold=local_fold)
    R = _inputs(sb, w, c)
    tiles = tile_grid(R, w.n, w.tile_m, w.tile_n)  # the tiles of one block, block-local rows
    sb.rotating = {"contrib": len(tiles)}  # a block's relative rank, then its tile
    sb.fixed = push.FIXED if pushed else ()
    chunks = batches(tiles, w.chunk_tiles)
    chunk_of = {t.index: ci for ci, ch in enumerate(chunks) for t in ch}
    slot_rows, width = min(w.tile_m, R), min(w.tile_n, w.n)
    if g > 1:
        sb.buffer("P", w.m, w.n, w.dtype)
    if nodes > 1:
        # section m of SEND: this node's sums of block (m, l); section m of RECV: node m's sums of the
        # own block (ring: the running sum of block (m, l) from the previous node); one slot of
        # slot_rows x width per tile
        sb.buffer("SEND", nodes * len(tiles) * slot_rows, width, w.dtype)
        sb.buffer("PART", R, w.n, w.dtype)  # this node's sum of the own block
        sb.buffer("RECV", nodes * len(tiles) * slot_rows, width, w.dtype)
        if algorithm == "ring":
            sb.buffer("STAGE", nodes * len(tiles) * slot_rows, width, w.dtype)  # a ring hop's sum, as SEND
    sb.launch("fused", _roles(w, c))

    def reg(buf: str, rank: int, t, row0: int = 0) -> Region:
        return Region(buf, rank, row0 + t.row0, row0 + t.row1, t.col0, t.col1)

    def slot(buf: str, rank: int, m: int, t) -> Region:
        """Tile t of section m in the tile-major SEND or RECV."""
        r0 = (m * len(tiles) + t.index) * slot_rows
        return Region(buf, rank, r0, r0 + t.rows, 0, t.cols)

    def slots(buf: str, rank: int, m: int, chunk) -> Region:
        """The whole slots of a chunk of consecutive tiles: one contiguous message."""
        r0 = (m * len(tiles) + chunk[0].index) * slot_rows
        return Region(buf, rank, r0, r0 + len(chunk) * slot_rows, 0, width)

    def target(rank: int, q: int, t) -> tuple[Region, tuple[Signal, ...]]:
        """Where the node owner ``rank`` puts its node's sum of tile t of block q, and what it signals."""
        m = c.node_of(q)
        if m != c.node_of(rank):
            dm = (m - c.node_of(rank)) % nodes
            return slot("SEND", rank, m, t), (Signal(rank, "chunk_ready", dm * len(chunks) + chunk_of[t.index]),)
        if nodes > 1:
            return reg("PART", rank, t), (Signal(rank, "own_ready", chunk_of[t.index]),)
        return reg("OUT", rank, t), ()

    def moves(dst: Region, t) -> tuple[int, int, int]:
        """How a tile's output region steps to the next tile of its row: slot by slot in the
        tile-major SEND, one tile width elsewhere."""
        return (0, slot_rows, 0) if dst.buffer == "SEND" else (0, 0, t.cols)

    for rank in sb.ranks():  # compute: remote nodes' blocks first, then this node's
        node, local = c.node_of(rank), c.local_of(rank)
        order = [c.rank((node + dn) % nodes, (local + dl) % g) for dn in offsets for dl in range(g)]
        for position, q in enumerate(order):
            owner = c.rank(node, c.local_of(q))
            for run in runs(tiles, period=w.chunk_tiles if g == 1 and nodes > 1 else 0):  # G = 1: a chunk's signal
                t = run[0]
                a = Region("A", rank, q * R + t.row0, q * R + t.row1, 0, w.k)
                b = Region("B", rank, 0, w.k, t.col0, t.col1)
                sig_step = (0, int(g > 1))
                if pushed:
                    dst, (signal, sig_step) = reg("P", rank, t, q * R), push.ready(c, rank, position, t, len(tiles))
                    sig = (signal,)
                elif g > 1:
                    dst, sig = reg("P", rank, t, q * R), (Signal(owner, "contrib", c.relative(q, owner) * len(tiles) + t.index),)
                else:
                    dst, sig = target(rank, q, t)
                sb.add(rank, Role.COMPUTE, Op.GEMM, reads=(a, b), writes=(dst,), signals=sig,
                       label=f"block {q} tile {{}}", count=len(run),
                       step=Step(((0, 0, 0), (0, 0, t.cols), moves(dst, t)), (sig_step,) * len(sig), label=(t.index, 1)))

    for rank in sb.ranks():
        node, local = c.node_of(rank), c.local_of(rank)
        peers = c.node_ranks_from(rank)  # self first
        blocks = [c.rank((node + dn) % nodes, local) for dn in offsets]  # own block last
        if pushed:
            push.intra(sb, c, rank, offsets, tiles, R, w.chunk_tiles if nodes > 1 else 0, target, moves)
        elif g > 1:
            for q in blocks:
                for run in runs(tiles, period=w.chunk_tiles if nodes > 1 else 0):  # a chunk's signal
                    t = run[0]
                    dst, sig = target(rank, q, t)
                    contrib = Signal(rank, "contrib", c.relative(q, rank) * len(tiles) + t.index)
                    sb.add(rank, Role.INTRA, Op.REDUCE, waits=(Wait(contrib, g),),
                           reads=tuple(reg("P", p, t, q * R) for p in peers), writes=(dst,), signals=sig,
                           label=f"block {q} tile {{}} reduce", count=len(run),
                           step=Step(((0, 0, t.cols),) * g + (moves(dst, t),), waits=(1,), label=(t.index, 1)))
        if nodes > 1 and algorithm == "ring":
            _ring(sb, c, rank, chunks, slots, slot, reg, slot_rows)
        elif nodes > 1:
            for q in blocks[:-1]:
                m = c.node_of(q)
                for ci, chunk in enumerate(chunks):
                    ready = Signal(rank, "chunk_ready", ((m - node) % nodes) * len(chunks) + ci)
                    sb.add(rank, Role.SEND, Op.PUT, chunk=ci, waits=(Wait(ready, len(chunk)),),
                           reads=(slots("SEND", rank, m, chunk),), writes=(slots("RECV", q, node, chunk),),
                           signals=(Signal(q, "arrived", ci),), label=f"chunk {ci} to rank {q}")
            others = [m for m in range(nodes) if m != node]
            for ci, chunk in enumerate(chunks):
                waits = (Wait(Signal(rank, "arrived", ci), nodes - 1), Wait(Signal(rank, "own_ready", ci), len(chunk)))
                for run in runs(chunk):
                    t = run[0]
                    sb.add(rank, Role.RECV, Op.REDUCE, waits=waits, writes=(reg("OUT", rank, t),),
                           reads=(reg("PART", rank, t),) + tuple(slot("RECV", rank, m, t) for m in others),
                           label="tile {} add remote", count=len(run),
                           step=Step(((0, 0, t.cols),) + ((0, slot_rows, 0),) * len(others) + ((0, 0, t.cols),),
                                     label=(t.index, 1)))
    return sb.build(flops_per_gpu(w, c))  # every output write is the owner's own: no drain needed


def _ring(sb: ScheduleBuilder, c: Cluster, rank: int, chunks, slots, slot, reg, slot_rows: int) -> None:
    """The rail reduce-scatter as a ring: the node sums of block (m, l) start on node m + 1 and pass
    node to node, each adding its own, to their owner (m, l), chunk by chunk. Signals are indexed by
    the block's node offset from the rank, as the direct exchange's: ``rs`` a partial sum landed in
    RECV, ``staged`` this node's hop sum is in STAGE. SEND and RECV run hop by hop, so every wait
    is on an earlier hop of the previous node."""
    nodes, node, local = c.nodes, c.node_of(rank), c.local_of(rank)
    nxt = c.rank((node + 1) % nodes, local)

    def key(m: int, at_node: int, ci: int) -> int:
        return ((m - at_node) % nodes) * len(chunks) + ci

    for h in range(nodes):
        m = (node - 1 - h) % nodes  # the block this node handles at hop h
        for ci, chunk in enumerate(chunks):
            arrived = Wait(Signal(rank, "rs", key(m, node, ci)), 1)
            if h == nodes - 1:  # the own block: add the node's sum, and the ring's, into OUT
                for run in runs(chunk):
                    t = run[0]
                    sb.add(rank, Role.RECV, Op.REDUCE, waits=(arrived, Wait(Signal(rank, "own_ready", ci), len(chunk))),
                           reads=(reg("PART", rank, t), slot("RECV", rank, m, t)), writes=(reg("OUT", rank, t),),
                           label="tile {} add ring", count=len(run),
                           step=Step(((0, 0, t.cols), (0, slot_rows, 0), (0, 0, t.cols)), label=(t.index, 1)))
                continue
            ready = Wait(Signal(rank, "chunk_ready", key(m, node, ci)), len(chunk))
            src, waits = "SEND", (ready,)
            if h:
                staged = Signal(rank, "staged", key(m, node, ci))
                for run in runs(chunk):
                    t = run[0]
                    sb.add(rank, Role.RECV, Op.REDUCE, waits=(arrived, ready), signals=(staged,),
                           reads=(slot("SEND", rank, m, t), slot("RECV", rank, m, t)), writes=(slot("STAGE", rank, m, t),),
                           label=f"block {m} tile {{}} ring hop {h}", count=len(run),
                           step=Step(((0, slot_rows, 0),) * 3, ((0, 0),), label=(t.index, 1)))
                src, waits = "STAGE", (Wait(staged, len(chunk)),)
            sb.add(rank, Role.SEND, Op.PUT, chunk=key(m, node, ci), waits=waits, reads=(slots(src, rank, m, chunk),),
                   writes=(slots("RECV", nxt, m, chunk),), signals=(Signal(nxt, "rs", key(m, node + 1, ci)),),
                   label=f"block {m} chunk {ci} ring hop {h}")


@paused_gc()
def build_baseline(w: Workload, c: Cluster, first_nodes: int = 0, grouped: bool = False,
                   library_tasks: bool = True, local_fold: bool = False) -> Schedule:
    """GEMM on all SMs, then an NCCL-style hierarchical reduce-scatter in a second launch (a timing
    build, ``library_tasks=False``, leaves the collective's tasks out; its ``local_fold``, all but local
    rank 0's: see :class:`~mkernel.schedule_builder.ScheduleBuilder`)."""
    check(w, c)
    g, nodes = c.gpus_per_node, c.nodes
    name = "gemm+nccl_ring_rs" if w.baseline == "ring" else "gemm+nccl_hier_rs"
    sb = ScheduleBuilder("gemm_rs", name, c.world, g, c.gpu.sms, first_nodes=first_nodes, grouped=grouped,
                         library_tasks=library_tasks, local_fold=local_fold)
    R = _inputs(sb, w, c)
    for name in ("P", "IN1", "IN2", "STAGE", "NODE"):
        sb.buffer(name, w.m, w.n, w.dtype)
    sb.launch("gemm", {Role.COMPUTE: c.gpu.sms})
    for rank in sb.ranks():
        for run in grid_runs(w.m, w.n, w.tile_m, w.tile_n):
            t = run[0]
            dst = Region("P", rank, t.row0, t.row1, t.col0, t.col1)
            if c.world == 1:
                dst = Region("OUT", rank, t.row0, t.row1, t.col0, t.col1)
            sb.add(rank, Role.COMPUTE, Op.GEMM, writes=(dst,), label="tile {}", count=len(run), step=row_step(t),
                   reads=(Region("A", rank, t.row0, t.row1, 0, w.k), Region("B", rank, 0, w.k, t.col0, t.col1)))
    if c.world == 1:
        return sb.build(flops_per_gpu(w, c))
    call = coll.nccl_call(w, "reduce_scatter", w.m * w.n * DTYPE_BYTES[w.dtype])
    if w.baseline == "ring":  # NCCL's flat ring over every rank
        coll.flat_ring_launch(sb, c, w, "reducescatter", call)
        if not sb.builds():
            return sb.build(flops_per_gpu(w, c))
        parts = max(1, min(R, w.baseline_channels))
        blocks = [[split_rows(q * R, (q + 1) * R, parts)[p] for q in range(c.world)] for p in range(parts)]
        coll.reduce_scatter(sb, coll.flat_ring(c, w, blocks, w.n), src="P", inbuf="IN1", stage="STAGE",
                            dest=lambda rank, r0, r1: Region("OUT", rank, r0 - rank * R, r1 - rank * R, 0, w.n))
        return sb.build(flops_per_gpu(w, c))
    ch = w.baseline_channels
    sb.launch("reducescatter", {Role.INTRA: ch if g > 1 else 0, Role.SEND: coll.network_sms(ch, nodes),
                                Role.RECV: coll.network_sms(ch, nodes)}, call)
    if not sb.builds():
        return sb.build(flops_per_gpu(w, c))
    rows_per_chunk = baseline_rows_per_chunk(w.baseline_chunk_kib, w.n, DTYPE_BYTES[w.dtype])
    parts = max(1, min(R, ch // nodes if g > 1 else ch))

    def block(q: int) -> list[tuple[int, int]]:  # block q's rows, cut for the channels
        return split_rows(q * R, (q + 1) * R, parts)

    def out(rank: int, r0: int, r1: int) -> Region:
        return Region("OUT", rank, r0 - rank * R, r1 - rank * R, 0, w.n)

    if g > 1:  # in each node, local l ends with the node sum of every block (m, l)
        for node in sb.nodes():  # lanes in node order from this node (the same on every node)
            lanes = [[block(c.rank((node + dm) % nodes, b))[p] for b in range(g)] for dm in range(nodes)
                     for p in range(parts)]
            ring = coll.Ring(c.node_ranks(node), lanes, w.n, rows_per_chunk, False, "n")
            if nodes == 1:
                coll.reduce_scatter(sb, ring, src="P", inbuf="IN1", stage="STAGE", dest=out)
            else:
                coll.reduce_scatter(sb, ring, src="P", inbuf="IN1", stage="STAGE",
                                    dest=lambda r, r0, r1: Region("NODE", r, r0, r1, 0, w.n),
                                    done=lambda r, lane: (Signal(r, "node_done", lane),))
    if nodes > 1:  # among rail peers: node m ends with the total of block (m, l)
        for local in range(g):
            rail = c.rail(local)
            lanes = [[block(c.rank(m, local))[p] for m in range(nodes)] for p in range(parts)]
            ring = coll.Ring(rail, lanes, w.n, rows_per_chunk, True, f"rail{local}")
            if g > 1:
                counts = {(r, lane): sb.bumped(Signal(r, "node_done", lane))
                          for r in rail if sb.emits(r) for lane in range(nodes * parts)}

                def ready(r: int, p: int, m: int) -> tuple:  # block (m, local) part p: node-ring lane dm*parts+p
                    lane = ((m - c.node_of(r)) % nodes) * parts + p
                    return (Wait(Signal(r, "node_done", lane), counts[(r, lane)]),)
            coll.reduce_scatter(sb, ring, src="NODE" if g > 1 else "P", inbuf="IN2", stage="STAGE", dest=out,
                                ready=ready if g > 1 else coll.none)
    return sb.build(flops_per_gpu(w, c))  # each block's last reduce runs on its owner: no drain needed


def make_inputs(w: Workload, c: Cluster, rng: np.random.Generator) -> dict[str, list[np.ndarray]]:
    """Fresh random A_r and B_r for every rank (scaled so sums stay O(1))."""
    scale = 1.0 / math.sqrt(w.k * c.world)
    return {"A": [rng.standard_normal((w.m, w.k), dtype=np.float32) for _ in range(c.world)],
            "B": [(rng.standard_normal((w.k, w.n), dtype=np.float32) * scale).astype(np.float32)
                  for _ in range(c.world)]}
