"""GEMM + AllReduce (row-parallel tensor parallelism), fused and unfused.

Unfused equivalent, on every rank r of the world::

    C_r = A_r @ B_r                    # A_r: m x k, B_r: k x n (k is the per-rank K_local)
    out_r = all_reduce(C_r, sum)       # every rank ends with sum_r A_r @ B_r, m x n

Fused schedule (design §6). Output tiles are dealt round-robin to the G local ranks of each node;
the rail peers of a node share one owner pattern::

    compute  | tile t -> P (own partial) ........ signal contrib[t] on its owner
    intra    | owner: wait contrib[t] = G, pull G partials over NVLink, sum -> PART slot
    send     | owner: wait chunk of `chunk_tiles` sums ready, put it to each rail peer (one message)
    recv     | owner: wait the chunk from all N-1 nodes and its own sums, add -> out tile, signal final[t]
    intra    | owner: wait final[t], push the out tile to the G-1 local peers (unicast stores)
    compute  | every rank: last task waits until all out tiles written into it have landed

The intra queue (:mod:`._gemm_ar_intra`) interleaves the broadcasts ``BCAST_LAG`` chunks behind the
reductions, so the intra SMs keep reducing while the network round trip is in flight. Every wait
targets a task earlier in its own queue or a queue with no waits back, so no SM budget deadlocks.

``Workload.node_reduce = "push"`` replaces the owner's pulls with pushes: each rank's intra role
reduce-adds its partial of a tile into the owner's, and the owner copies the sum out
(:mod:`._gemm_ar_push`, its timeline there); the network phase and the broadcasts stay as above.

Baseline ("gemm+nccl_hier_ar"): one GEMM launch on all SMs, then one NCCL-style launch doing a
hierarchical all-reduce: ring reduce-scatter in the node, ring all-reduce (reduce-scatter and
all-gather) among rail peers on each rank's 1/G, ring all-gather in the node.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..cluster import Cluster
from ..errors import ProblemError
from ..ir import BufferKind, Op, Region, Role, Schedule, Signal, Wait, new_region, new_signal, new_step, paused_gc
from ..problems import NODE_REDUCES, Workload
from ..schedule_builder import ScheduleBuilder
from . import _all_reduce as all_reduce
from . import _collectives as coll
from . import _gemm_ar_push as push
from . import _rail as rail
from ._gemm_ar_net import RankNet, Regions, direct_exchange, grouped_exchange, shared_exchange
from ._gemm_ar_intra import intra_queue as _intra_queue  # (the name docs/results/data/sim-speed-*/phases.py wraps)
from ._tiling import Tile, dealt_order_runs_of, grid_runs, row_step, strided_chunk_runs, tile_grid

DEFAULT_INTRA_SMS = 64  # per 132 SMs: the best static split on an H200 pair, and in the sim at 1x2 and 2x8
# (docs/results/2026-11-30-nvlink.md); each SM pulls partials at a few GB/s, far below the port
DEFAULT_SEND_SMS = 2
DEFAULT_RECV_SMS = 8


def check(w: Workload, c: Cluster) -> None:
    """Refuse shapes this op cannot split, with the reason."""
    w.require_positive("m", "n", "k", "tile_m", "tile_n", "chunk_tiles")
    if w.node_reduce not in NODE_REDUCES:
        raise ProblemError(f"gemm_ar: node_reduce={w.node_reduce!r}; allowed: {', '.join(NODE_REDUCES)}")
    if w.m < c.world:
        raise ProblemError(f"gemm_ar splits the m rows over the {c.world} ranks in its baseline, so m "
                           f"must be >= {c.world}, got {w.m}")
    roles = _roles(w, c)
    if roles[Role.COMPUTE] < 1:
        raise ProblemError(f"gemm_ar leaves no compute SMs: communication roles take {c.gpu.sms - roles[Role.COMPUTE]}"
                           f" of {c.gpu.sms}")


def plan(w: Workload, c: Cluster) -> tuple[str, int, int]:
    """(algorithm, grouped chunks, shared slots): a grouped algorithm runs on the first chunks that
    fill whole groups of N (each whole for every owner: the last owners may have a slot less), the
    rest going direct; twoshot on a share too small for one group shares its first slots as N row
    pieces instead (:func:`_gemm_ar_net.shared_exchange`)."""
    algorithm = rail.choose(w, c)
    if algorithm not in rail.GROUPED:
        return algorithm, 0, 0
    slots = len(tile_grid(w.m, w.n, w.tile_m, w.tile_n)) // c.gpus_per_node  # every owner's
    whole = slots // w.chunk_tiles // c.nodes * c.nodes
    shared = slots if algorithm == "twoshot" and not whole and slots * w.tile_m >= c.nodes else 0
    return algorithm, whole, shared


def node_symmetric(w: Workload, c: Cluster) -> bool:
    """Whether every node runs node 0's queues under the node shift: always with ``direct``; with a
    grouped algorithm only if every tile has one shape (each node visits a group's chunks in its
    own order, where a ragged edge tile would sit at another place) and shared pieces are equal."""
    algorithm, whole, shared = plan(w, c)
    if not (whole or shared):
        return True
    return w.m % w.tile_m == 0 and w.n % w.tile_n == 0 and shared * w.tile_m % c.nodes == 0


def local_symmetric(w: Workload, c: Cluster) -> bool:
    """Whether every local rank runs local rank 0's queues rotated (the check of
    :mod:`mkernel.sim.localfold`): tiles are dealt to owners G to a slot and each rank computes its
    own tile of a slot first, so every slot must hold G tiles of one shape. Told from the shape
    alone (it is asked before the size check, so it must not list a huge grid's tiles): the grid is
    row-major, so a narrow last column shares a slot with a full one unless it is the only column,
    and the short last row must start a slot."""
    g, rows, cols = c.gpus_per_node, math.ceil(w.m / w.tile_m), math.ceil(w.n / w.tile_n)
    if rows * cols % g:
        return False
    if g == 1:
        return True
    if w.n % w.tile_n and cols > 1:
        return False
    return w.m % w.tile_m == 0 or rows == 1 or (rows - 1) * cols % g == 0


def flops_per_gpu(w: Workload, c: Cluster) -> float:
    return 2.0 * w.m * w.n * w.k


def _roles(w: Workload, c: Cluster) -> dict[Role, int]:
    return coll.role_budget(w, c, {Role.INTRA: DEFAULT_INTRA_SMS if c.gpus_per_node > 1 else 0,
                                   Role.SEND: DEFAULT_SEND_SMS if c.nodes > 1 else 0,
                                   Role.RECV: DEFAULT_RECV_SMS if c.nodes > 1 else 0})


def _inputs(sb: ScheduleBuilder, w: Workload) -> None:
    sb.buffer("A", w.m, w.k, w.dtype, BufferKind.INPUT)
    sb.buffer("B", w.k, w.n, w.dtype, BufferKind.INPUT)


@paused_gc()
def build(w: Workload, c: Cluster, first_nodes: int = 0, grouped: bool = False, local_fold: bool = False) -> Schedule:
    """The fused schedule (only the first nodes' tasks with ``first_nodes``, and only their local rank
    0's with ``local_fold``: see ScheduleBuilder)."""
    check(w, c)
    if local_fold and not local_symmetric(w, c):  # (its local ranks' queues differ: the folded run would deadlock)
        raise ProblemError(f"gemm_ar m={w.m} n={w.n} on {c.gpus_per_node} GPUs a node: a build of local rank 0 alone "
                           f"(local_fold) needs every slot of {c.gpus_per_node} tiles to hold tiles of one shape "
                           f"(gemm_ar.local_symmetric); build every local rank")
    g, nodes, ct = c.gpus_per_node, c.nodes, w.chunk_tiles
    pushed = g > 1 and w.node_reduce == "push"
    algorithm, whole, shared = plan(w, c)
    tiles = tile_grid(w.m, w.n, w.tile_m, w.tile_n)
    slots = math.ceil(len(tiles) / g)
    nchunks = math.ceil(slots / ct)
    sb = ScheduleBuilder("gemm_ar", "fused", c.world, g, c.gpu.sms, first_nodes=first_nodes, grouped=grouped,
                         local_fold=local_fold, rotating={"contrib": 1, "pushed": 1},  # a tile's index: its owner
                         fixed=("out_done", "base"))  # is index mod G; base's: the sender numbered from the receiver
    _inputs(sb, w)
    if g > 1:
        sb.buffer("P", w.m, w.n, w.dtype)
    if nodes > 1:
        sb.buffer("PART", slots * w.tile_m, w.tile_n, w.dtype)
        sb.buffer("RECV", nodes * slots * w.tile_m, w.tile_n, w.dtype)
    if whole or shared:
        sb.buffer("FIN", slots * w.tile_m, w.tile_n, w.dtype)  # every grouped chunk's final sum, slot by slot
        if algorithm == "ring":
            sb.buffer("STAGE", slots * w.tile_m, w.tile_n, w.dtype)
    sb.buffer("OUT", w.m, w.n, w.dtype, BufferKind.OUTPUT)
    sb.launch("fused", _roles(w, c))
    order = {node: rail.chunk_order(nchunks, whole, nodes, node, algorithm) for node in sb.nodes()}
    # node -> the first node of its chunk order: its tables below, its ranks' compute groups and (it, local) visits
    twin = {node: next(n for n in order if order[n] == o) for node, o in order.items()}
    # a tile's signal index on each node: its slot's place in the node's chunk order (the tile index
    # itself when chunks go in order), so the queues stay node-symmetric; a table, read ~7 times a tile
    index, pos, rels, rel_arrays = np.arange(len(tiles)), {}, {}, {}
    for node in dict.fromkeys(twin.values()):
        p = pos[node] = {ci: j for j, ci in enumerate(order[node])}
        position = np.array([p[ci] for ci in range(nchunks)], np.int64)  # chunk -> its place in the node's order
        rel_arrays[node] = (position[index // g // ct] * ct + index // g % ct) * g + index % g
        rels[node] = rel_arrays[node].tolist()
    pos, rels, rel_arrays = ({node: d[twin[node]] for node in order} for d in (pos, rels, rel_arrays))
    # rank -> its out_done signal, one object each (~10 bumps a tile)
    out_done: Callable[[int], Signal] = [Signal(rank, "out_done") for rank in range(c.world)].__getitem__
    regs = Regions(w, slots, g)
    compute, gemm = Role.COMPUTE, Op.GEMM  # (an enum member read off its class: ~1k instructions in 3.11)
    by_cycle = ((0, g),)  # (a row group's signal steps from one cycle of owners to the next: G indices on)
    spans_of, visits, locals_ = {}, {}, range(0, g, g if sb.local_fold else 1)
    for rank in sb.ranks():  # compute: slot-major in the node's chunk order, own tile first within each slot
        node, local = c.node_of(rank), c.local_of(rank)
        rel = rels[node]
        if twin[node] not in spans_of:  # (each local rank's, the same on every node of one chunk order)
            spans_of[twin[node]] = dealt_order_runs_of(w.m, w.n, w.tile_m, w.tile_n, g, ct, order[node], locals_,
                                                       rel_arrays[node], g > 1 and not pushed,
                                                       g if g > 1 else ct if nodes > 1 else 0, sb.local_fold)
        spans = spans_of[twin[node]][local]
        a_rows, b_cols, steps = {}, {}, {}  # the operand regions, one object per tile row of A and column of B

        def operands(u, rank=rank, a_rows=a_rows, b_cols=b_cols) -> tuple[Region, Region]:
            a = a_rows.get(u.row0)
            if a is None:
                a = a_rows[u.row0] = Region("A", rank, u.row0, u.row1, 0, w.k)
            b = b_cols.get(u.col0)
            if b is None:
                b = b_cols[u.col0] = Region("B", rank, 0, w.k, u.col0, u.col1)
            return a, b

        for t, count, rotate, cycles in spans:
            owner = node * g + t.index % g
            if cycles:  # (one tuple object for the groups that step alike: validate reads each once)
                alike = steps.get(("cycles", t.cols))
                if alike is None:
                    alike = steps["cycles", t.cols] = (((0, 0, 0), (0, 0, t.cols), (0, 0, t.cols)), ((1, 1),))
                sb.add_group(rank, compute, gemm, operands(t), (regs.tile("P", rank, t),), (),
                             (new_signal(owner, "contrib", rel[t.index]),), "tile {}", count,
                             new_step(*alike, (), 0, (t.index, 1), g, by_cycle, rotate))
                continue
            if pushed:  # local flags: the own tile alone (its chunk's relay counts it), the rest ready to push
                groups = [(group[0], len(group), regs.tile("P", rank, group[0]), (signal,), step)
                          for group, signal, step in push.compute_groups(
                              c, rank, tiles[t.index:t.index + count],
                              lambda u, node=node: pos[node][u.index // g // ct], lambda u, rel=rel: rel[u.index])]
            elif g > 1:
                groups = [(t, count, regs.tile("P", rank, t), (new_signal(owner, "contrib", rel[t.index]),), (1, 1))]
            elif nodes > 1:  # G = 1: one owner, so a shared exchange takes every slot
                ready = Signal(rank, "group_ready") if shared else Signal(rank, "chunk_ready", pos[node][t.index // ct])
                groups = [(t, count, regs.slot("PART", rank, t), (ready,), (0, 0))]
            else:
                groups = [(t, count, regs.tile("OUT", rank, t), (out_done(rank),), (0, 0))]
            for u, k, dst, sig, signal_step in groups:
                # one tuple object for the groups that step alike: validate reads each once
                alike = steps.get((u.cols, signal_step))
                if alike is None:  # (the output moves a tile right; PART, a slot down)
                    alike = steps[u.cols, signal_step] = (
                        ((0, 0, 0), (0, 0, u.cols), (0, w.tile_m, 0) if dst.buffer == "PART" else (0, 0, u.cols)),
                        (signal_step,))
                sb.add_group(rank, compute, gemm, operands(u), (dst,), (), sig, "tile {}", k,
                             new_step(*alike, (), 0, (u.index, 1), 0, (), rotate))

    owned_by: dict = {}  # local rank -> its tiles, its chunks of them and each chunk's runs (alike on every node)
    tile_steps: dict = {}  # (RankNet.steps: one step object per kind of task and tile, for every node)
    for rank in sb.ranks():
        node, local = c.node_of(rank), c.local_of(rank)
        rel = rels[node]
        if local not in owned_by:
            owned = list(tiles[local::g])  # (tile i sits at position i of the grid)
            cuts = strided_chunk_runs(w.m, w.n, w.tile_m, w.tile_n, local + shared * g, g, ct)
            owned_by[local] = owned, chunks_of(cuts), cuts  # (chunks: this owner's, by absolute number, after
            # any shared slots)
        owned, chunks, cuts = owned_by[local]
        visit = visits.get((twin[node], local))  # (positions, chunks and their tiles: alike on twin nodes)
        if visit is None:
            visit = visits[twin[node], local] = [(j, ci, chunks[ci]) for j, ci in enumerate(order[node])
                                                 if ci < len(chunks)]
        peers = c.node_ranks_from(rank)  # self first
        net = RankNet(sb, w, c, rank, regs, nchunks, out_done, steps=tile_steps)
        if g > 1:
            pushes = None
            if pushed:
                def pushes(j: int, rank=rank, node=node, rel=rel) -> list:
                    ci = order[node][j]
                    return push.chunk_pushes(sb, c, rank, regs, lambda lo: [
                        tiles[i] for s in range(ci * ct, min(slots, (ci + 1) * ct)) if (i := s * g + lo) < len(tiles)],
                        j, lambda t: rel[t.index])
            _intra_queue(sb, w, c, rank, peers, visit, cuts, whole, owned[:shared], net, rel, out_done, pushes)
        if nodes > 1:
            if shared:
                shared_exchange(net, owned[:shared], shared)
            if whole:
                grouped_exchange(net, visit[:whole], algorithm)
            direct_exchange(net, visit[whole:], cuts, rel)
    _drain(sb, out_done, len(tiles))
    return sb.build(flops_per_gpu(w, c))


def chunks_of(cuts: list[list[list[Tile]]]) -> list[list[Tile]]:
    """Each chunk's tiles from its runs (:func:`strided_chunk_runs`): the runs joined, or the one run
    itself where the chunk is one run (most are), so no list is made for it: ``batches`` of the
    owner's tiles, without its lists (a 2 x 8 GEMM+AR 32768^2 build: 8k, a MB while it builds)."""
    return [cut[0] if len(cut) == 1 else [t for run in cut for t in run] for cut in cuts]


def _drain(sb: ScheduleBuilder, out_done, tiles: int) -> None:
    """Each rank's kernel ends only when every write into its output has landed: one bump of its
    out_done by each tile's (the all-reduce writes every tile once into every rank's OUT, and each
    write bumps the signal of the rank it lands on), the count sb.bumped would find (tested) without
    scanning the build's tasks (a 2 x 8 GEMM+AR 32768^2 build: 53k tasks, a twentieth of its time)."""
    for rank in sb.ranks():
        sb.add(rank, Role.COMPUTE, Op.NOP, waits=(Wait(out_done(rank), tiles),), label="drain")


@paused_gc()
def build_baseline(w: Workload, c: Cluster, first_nodes: int = 0, grouped: bool = False,
                   library_tasks: bool = True, local_fold: bool = False) -> Schedule:
    """GEMM on all SMs, then an NCCL-style hierarchical all-reduce in a second launch (without its
    tasks in a timing build, ``library_tasks=False``, whose ``local_fold`` has only local rank 0's
    tiles: see :class:`~mkernel.schedule_builder.ScheduleBuilder`)."""
    check(w, c)
    name = "gemm+nccl_ring_ar" if w.baseline == "ring" else "gemm+nccl_hier_ar"
    sb = ScheduleBuilder("gemm_ar", name, c.world, c.gpus_per_node, c.gpu.sms, first_nodes=first_nodes, grouped=grouped,
                         library_tasks=library_tasks, local_fold=local_fold)
    _inputs(sb, w)
    for name in ("P", "IN1", "IN2", "STAGE"):
        sb.buffer(name, w.m, w.n, w.dtype)
    sb.buffer("OUT", w.m, w.n, w.dtype, BufferKind.OUTPUT)
    sb.launch("gemm", {Role.COMPUTE: c.gpu.sms})
    gemm_dst, grid, k = "OUT" if c.world == 1 else "P", grid_runs(w.m, w.n, w.tile_m, w.tile_n), w.k
    steps = [row_step(run[0]) for run in grid]  # (a row's step: the same on every rank, made once)
    for rank in sb.ranks():
        add = sb.appender(rank, Role.COMPUTE, Op.GEMM, "tile {}")
        for run, step in zip(grid, steps):
            t = run[0]
            add((new_region("A", rank, t.row0, t.row1, 0, k), new_region("B", rank, 0, k, t.col0, t.col1)),
                (new_region(gemm_dst, rank, t.row0, t.row1, t.col0, t.col1),), (), (), len(run), step)
    if c.world > 1:
        (all_reduce.ring if w.baseline == "ring" else all_reduce.hierarchical)(sb, w, c)
    return sb.build(flops_per_gpu(w, c))


def make_inputs(w: Workload, c: Cluster, rng: np.random.Generator) -> dict[str, list[np.ndarray]]:
    """Fresh random A_r and B_r for every rank (scaled so sums stay O(1))."""
    scale = 1.0 / math.sqrt(w.k * c.world)
    return {"A": [rng.standard_normal((w.m, w.k), dtype=np.float32) for _ in range(c.world)],
            "B": [(rng.standard_normal((w.k, w.n), dtype=np.float32) * scale).astype(np.float32)
                  for _ in range(c.world)]}
