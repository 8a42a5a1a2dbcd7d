"""Ring Attention (sequence parallelism), non-causal or causal, fused and unfused.

Shape fields: ``m`` is the sequence per GPU (S), ``n`` the batch x heads count (BH), ``k`` the head
dimension (D, a multiple of 16). Every rank holds Q_r, K_r, V_r as BH*S x D (row bh*S + s).

Unfused equivalent, on every rank r::

    K, V = all_gather(K_r), all_gather(V_r)                  # every rank's KV slice
    out_r, lse_r = attention(Q_r, K, V)                     # softmax(Q K^T / sqrt(D)) V per head

Fused schedule (design §6)::

    send    | at launch: put the local KV slice, one message per head, once to each other node
            | (to the rail peer there)
    intra   | a ring in the node: pass each slice to the next GPU over NVLink, in kv_tile-row tiles; a slice
            | enters the node at its own rank, or at the rail peer that received it, and visits
            | every GPU of the node
    compute | attention tiles (tile_m query rows x one head x one slice), merged into an
            | online-softmax state (order-free), slices in arrival order; then one normalisation
            | per tile writes out and lse

Causal (``causal = 1``) balances the work with a zigzag split: the global sequence is cut into
2 * world chunks and rank r holds chunks r and 2 * world - 1 - r, so every rank computes the same
number of visible (query, key) pairs. Tiles whose keys all follow their queries are skipped; the
diagonal ones are masked (``Task.mask``).

The zigzag is node-symmetric but for the norms: from every other slice a rank merges two half
blocks (its first query half against the slice's first key half and its second query half against
it, when the slice comes from a lower rank; its second query half against both key halves when
from a higher one), whose tasks differ only in where their rows sit; but a tile of the first half
takes r + 1 merges on rank r and one of the second 2 * world - r, counts no node shift maps onto
node 0's. So on several nodes tile i of both halves share one counter (2 * world + 1 merges on
every rank) and both norms wait for all of it: every node then runs node 0's queues and a collapsed
run simulates one node. What it costs: a norm of the first half may wait for its twin's last merge
(in the simulator; the hw plan still folds each norm into its own tile's last merge, since the
twin's merges share no rows with it: hw/lowering/fold.py). On one node each tile keeps its own
counter.

Baseline ("nccl_hier_ag_kv+attn"): an NCCL-style hierarchical all-gather of K and V in one launch,
then the attention tiles on all SMs, at the kernel profile's attention speed (``reference``: torch's
default SDPA, cuDNN on the H200).

The paper's baseline ("nccl_hier_ag_kv+fa2", :func:`build_paper_baseline`): the same schedule, its
attention at FlashAttention-2's speed in either profile. The reference code's EFA chart labels its
ring-attention NCCL baseline "FA2+NCCL", and its other baselines run flash-attn-2 locally
(uccl-project/mKernel, plots/plot_tflops_efa.py); the simulator takes FA2's rate from the calibrated
``gpu.attention_efficiency`` (torch's flash SDPA backend, FlashAttention-2's kernels: 344 TFLOPS on
the H200 against 600 for the default dispatch). docs/results/2026-12-05-paper-check.md.
"""
from __future__ import annotations

import math

import numpy as np

from ..cluster import Cluster
from ..errors import ProblemError
from ..ir import (DTYPE_BYTES, BufferKind, Op, Region, Role, Schedule, Signal, Step, Wait, new_signal, new_wait,
                  paused_gc)
from ..problems import MAX_TASKS, Workload
from ..schedule_builder import ScheduleBuilder
from . import _collectives as coll
from ._tiling import baseline_rows_per_chunk

DEFAULT_INTRA_SMS = 24  # per 132 SMs at REFERENCE_TOKENS per GPU, scaled by REFERENCE_TOKENS / tokens, in 8..32
REFERENCE_TOKENS = 1536  # K/V bytes grow with the sequence, attention FLOPs with its square: the ring's
# share shrinks as 1/S. On an H200 pair 24 SMs beat 8 at 768 tokens (312 vs 543 us) and 8 beat 24 from
# 3072 up (2.80 vs 3.24 ms at 3072, 40.3 vs 46.3 ms at 12288): docs/results/2026-11-30-nvlink.md
PAPER_BASELINE = "nccl_hier_ag_kv+fa2"  # listed in mkernel.cluster.FA2_VARIANTS
DEFAULT_SEND_SMS = 2


def check(w: Workload, c: Cluster) -> None:
    """Refuse shapes this op cannot split, with the reason."""
    for name, what in (("m", "sequence per GPU"), ("n", "batch x heads"), ("k", "head dimension"),
                       ("tile_m", "query rows per tile")):
        if getattr(w, name) < 1:
            raise ProblemError(f"ring_attention needs {name} ({what}) >= 1, got {getattr(w, name)}")
    if w.k % 16:
        raise ProblemError(f"ring_attention needs a head dimension (k) that is a multiple of 16, got {w.k}")
    if w.kv_tile < 1:
        raise ProblemError(f"ring_attention needs kv_tile (rows of K and V per ring step) >= 1, got {w.kv_tile}")
    if w.causal not in (0, 1):
        raise ProblemError(f"ring_attention's causal is 0 or 1, got {w.causal}")
    if w.causal and w.m % 2:
        raise ProblemError(f"causal ring_attention splits each rank's sequence in two zigzag halves, so the "
                           f"sequence per GPU (m) must be even, got {w.m}")
    if _roles(w, c)[Role.COMPUTE] < 1:
        raise ProblemError(f"ring_attention leaves no compute SMs of {c.gpu.sms}")
    tasks = c.world * w.n * (c.world + 1) * math.ceil(w.m / w.tile_m)
    if tasks > MAX_TASKS:
        raise ProblemError(f"ring_attention with {w.n} heads, sequence {w.m} and tile_m {w.tile_m} on {c.world} GPUs "
                           f"would declare {tasks:,} tasks (at most {MAX_TASKS:,}); raise tile_m or lower n")


def flops_per_gpu(w: Workload, c: Cluster) -> float:
    """4 * BH * S_total^2 * D / world with S_total = world * S; half of it under a causal mask."""
    return 4.0 * w.n * c.world * w.m * w.m * w.k * (0.5 if w.causal else 1.0)


def _roles(w: Workload, c: Cluster) -> dict[Role, int]:
    intra = min(32, max(8, round(DEFAULT_INTRA_SMS * REFERENCE_TOKENS / w.m)))
    return coll.role_budget(w, c, {Role.INTRA: intra if c.gpus_per_node > 1 else 0,
                                   Role.SEND: DEFAULT_SEND_SMS if c.nodes > 1 else 0})


def _buffers(sb: ScheduleBuilder, w: Workload, c: Cluster) -> int:
    rows = w.n * w.m
    for name in ("Q", "K", "V"):
        sb.buffer(name, rows, w.k, w.dtype, BufferKind.INPUT)
    sb.buffer("KA", c.world * rows, w.k, w.dtype)  # slot q: rank q's K slice
    sb.buffer("VA", c.world * rows, w.k, w.dtype)
    sb.buffer("ACC", rows, w.k, "fp32")  # online-softmax state: unnormalised output,
    sb.buffer("STATS", rows, 2, "fp32")  # and (running max, running sum) per row
    sb.buffer("OUT", rows, w.k, w.dtype, BufferKind.OUTPUT)
    sb.buffer("LSE", rows, 1, "fp32", BufferKind.OUTPUT)
    return rows


def zigzag_position(rank: int, s: int, w: Workload, world: int) -> int:
    """Global sequence position of local row ``s`` (within a head) of ``rank``: causal attention
    splits the sequence into 2 * world chunks and gives rank r chunks r and 2 * world - 1 - r, so
    every rank has as much work under the mask (zigzag)."""
    half = w.m // 2
    chunk = rank if s < half else 2 * world - 1 - rank
    return chunk * half + s % half


def shares_counters(w: Workload, c: Cluster) -> bool:
    """Whether a causal build pairs the tiles' counters (see the module docstring): on several nodes,
    where the pairing is what makes the zigzag node-symmetric."""
    return bool(w.causal) and c.nodes > 1


def _attention(sb: ScheduleBuilder, w: Workload, c: Cluster, rank: int, sources, waits_for) -> None:
    """The compute queue of ``rank``: attention tiles over ``sources`` in order, then the norms.

    Causal: query tiles and key slices are cut at the zigzag halves; a (query half, key half) pair
    whose keys all lie after the queries is skipped, the diagonal pair is masked, the rest are full.
    """
    S, rows = w.m, w.n * w.m
    spans = [(0, S // 2), (S // 2, S)] if w.causal else [(0, S)]
    tiles = [(t0, min(h1, t0 + w.tile_m)) for h0, h1 in spans for t0 in range(h0, h1, w.tile_m)]
    half = len(tiles) // len(spans)  # query tiles per half
    paired = shares_counters(w, c)

    def done(bh: int, ti: int) -> Signal:  # the counter of tile ti's merges (and its twin's, paired)
        return Signal(rank, "attn", bh * half + ti % half if paired else bh * len(tiles) + ti)

    def same_half(a: tuple, b: tuple) -> bool:  # runs stop at the halves: each (query, key) half block
        return a[0] // half == b[0] // half  # is one run on every rank, whichever half it is

    def reached(q: int, k0: int, k1: int) -> list[tuple]:
        """(tile number, row0, row1, mask) of the tiles that slice ``q``'s keys ``k0 .. k1`` reach."""
        todo = []
        for ti, (t0, t1) in enumerate(tiles):
            mask = ()
            if w.causal:
                qpos, kpos = zigzag_position(rank, t0, w, c.world), zigzag_position(q, k0, w, c.world)
                if kpos > qpos + (t1 - t0) - 1:
                    continue  # every key after every query of the tile
                if kpos + (k1 - k0) - 1 > qpos:
                    mask = (qpos, kpos)
            todo.append((ti, t0, t1, mask))
        return todo

    # what a tile's counter counts: its merges, one an attention member, alike for every head (the
    # tiles a slice reaches do not depend on the head), so counted from the slice's runs, not by
    # ScheduleBuilder.bumped (which would list every member's key: 1.6M at 12288 x 64 heads)
    merges = [0] * len(tiles)
    for q in sources:
        local = q == rank  # the own slice is read in place
        runs = [(k0, k1, _runs(reached(q, k0, k1), lambda a, b: not (a[3] or b[3]) and same_half(a, b)))
                for k0, k1 in spans]  # (per slice: the same for every head)
        for _, _, tile_runs in runs:
            for ti, _, _, _, n in tile_runs:
                for j in range(ti, ti + n):
                    merges[j] += 1
        for bh in range(w.n):
            waits = waits_for(rank, q, bh)  # (a tuple of a wait per KV tile: made once per slice and head)
            for k0, k1, tile_runs in runs:
                kv = bh * S + (0 if local else q * rows)
                k = Region("K" if local else "KA", rank, kv + k0, kv + k1, 0, w.k)
                v = Region("V" if local else "VA", rank, kv + k0, kv + k1, 0, w.k)
                for ti, t0, t1, mask, n in tile_runs:
                    r0, r1 = bh * S + t0, bh * S + t1
                    sb.add(rank, Role.COMPUTE, Op.ATTN, accumulate=True, waits=waits, mask=mask,
                           reads=(Region("Q", rank, r0, r1, 0, w.k), k, v),
                           writes=(Region("ACC", rank, r0, r1, 0, w.k), Region("STATS", rank, r0, r1, 0, 2)),
                           signals=(done(bh, ti),),
                           label=f"slice {q} head {bh} keys {k0} tile {{}}", count=n,
                           step=Step(((0, t1 - t0, 0), (0, 0, 0), (0, 0, 0), (0, t1 - t0, 0), (0, t1 - t0, 0)),
                                     ((0, 1),), label=(ti, 1)))
    if paired:  # a tile and its twin in the other half count on one counter
        merges = [merges[ti % half] + merges[ti % half + half] for ti in range(len(tiles))]
    for bh in range(w.n):
        norms = [(ti, t0, t1, merges[ti]) for ti, (t0, t1) in enumerate(tiles)]
        for ti, t0, t1, bumps, n in _runs(norms, lambda a, b: a[3] == b[3] and same_half(a, b)):  # as many bumps
            r0, r1 = bh * S + t0, bh * S + t1
            sb.add(rank, Role.COMPUTE, Op.NORM, waits=(Wait(done(bh, ti), bumps),),
                   reads=(Region("ACC", rank, r0, r1, 0, w.k), Region("STATS", rank, r0, r1, 0, 2)),
                   writes=(Region("OUT", rank, r0, r1, 0, w.k), Region("LSE", rank, r0, r1, 0, 1)),
                   label=f"head {bh} tile {{}} norm", count=n, step=Step(((0, t1 - t0, 0),) * 4, waits=(1,),
                                                                         label=(ti, 1)))


def _runs(items: list[tuple], alike) -> list[tuple]:
    """Runs of consecutive tiles (number, row0, row1, ...) of one size, each next to the last and
    ``alike(previous, next)``: (first item's fields..., run length)."""
    out: list[list] = []
    for it in items:
        prev = out[-1][0] if out else None
        n = out[-1][1] if out else 0
        if (prev is not None and it[0] == prev[0] + n and it[1] == prev[1] + n * (prev[2] - prev[1])
                and it[2] - it[1] == prev[2] - prev[1] and alike(prev, it)):
            out[-1][1] += 1
        else:
            out.append([it, 1])
    return [(*it, n) for it, n in out]


@paused_gc()
def build(w: Workload, c: Cluster, first_nodes: int = 0, grouped: bool = False, local_fold: bool = False) -> Schedule:
    """The fused schedule (only the first nodes' tasks with ``first_nodes``, and only their local rank
    0's with ``local_fold``: see ScheduleBuilder)."""
    check(w, c)
    g, nodes, S = c.gpus_per_node, c.nodes, w.m
    kv_tiles = [(k0, min(S, k0 + w.kv_tile)) for k0 in range(0, S, w.kv_tile)]
    sb = ScheduleBuilder("ring_attention", "fused", c.world, g, c.gpu.sms, first_nodes=first_nodes, grouped=grouped,
                         local_fold=local_fold,  # a slice's relative rank, then its head (and KV tile)
                         rotating={"landed": w.n, "ringed": w.n * len(kv_tiles)})
    rows = _buffers(sb, w, c)
    sb.launch("fused", _roles(w, c))

    def slice_regions(rank: int, q: int, bh: int, own: bool, k0: int = 0, k1: int = S) -> tuple[Region, Region]:
        r0 = bh * S + (0 if own else q * rows)
        return (Region("K" if own else "KA", rank, r0 + k0, r0 + k1, 0, w.k),
                Region("V" if own else "VA", rank, r0 + k0, r0 + k1, 0, w.k))

    def landed(rank: int, q: int, bh: int) -> Signal:  # a head's slice, put whole by the rail peer
        return Signal(rank, "landed", c.relative(q, rank) * w.n + bh)

    def ringed(rank: int, q: int, bh: int, t: int) -> Signal:  # one KV tile, stored by the ring neighbour
        return Signal(rank, "ringed", (c.relative(q, rank) * w.n + bh) * len(kv_tiles) + t)

    def arrived(r: int, q: int, bh: int, t: int | None = None) -> tuple[Wait, ...]:
        """What makes slice q (head bh; one KV tile, or all of them) present on rank r."""
        if q == r:
            return ()
        if c.local_of(r) == c.local_of(q):  # entered the node at r, over the network
            return (Wait(landed(r, q, bh), 1),)
        first = ringed(r, q, bh, 0).index  # (ringed's index, made once: a slice has a wait per KV tile, 96 at
        # 12288 rows: made by mkernel.ir's quick constructors, a third of the cost)
        tiles = range(len(kv_tiles)) if t is None else (t,)
        return tuple([new_wait(new_signal(r, "ringed", first + i), 1) for i in tiles])

    for rank in sb.ranks():
        node, local = c.node_of(rank), c.local_of(rank)
        # (slice, hops it has travelled in this node's ring when it reaches this rank), arrival order
        sources = [(c.rank((node + dn) % nodes, (local - h) % g), h) for dn in range(nodes) for h in range(g)]
        if nodes > 1:  # the own slice to each other node's rail peer, first thing
            for dn in range(1, nodes):
                dst = c.rank((node + dn) % nodes, local)
                for bh in range(w.n):
                    sb.add(rank, Role.SEND, Op.PUT, chunk=bh, reads=slice_regions(rank, rank, bh, True),
                           writes=slice_regions(dst, rank, bh, False), signals=(landed(dst, rank, bh),),
                           label=f"slice {rank} head {bh} to node {(node + dn) % nodes}")
        if g > 1:  # the node ring, in KV tiles: forward every slice that has not yet visited the whole node
            nxt = c.rank(node, (local + 1) % g)
            kv_runs = _runs([(t, k0, k1) for t, (k0, k1) in enumerate(kv_tiles)], lambda a, b: True)  # of one size
            for q, h in sources:
                if h == g - 1:
                    continue
                for bh in range(w.n):
                    for t, k0, k1, n in kv_runs:
                        waits = arrived(rank, q, bh, t)
                        sb.add(rank, Role.INTRA, Op.COPY, waits=waits,
                               reads=slice_regions(rank, q, bh, q == rank, k0, k1),
                               writes=slice_regions(nxt, q, bh, False, k0, k1), signals=(ringed(nxt, q, bh, t),),
                               label=f"slice {q} head {bh} kv {{}} to rank {nxt}", count=n,
                               step=Step(((0, k1 - k0, 0),) * 4, ((0, 1),),
                                         tuple(int(wt.signal.name == "ringed") for wt in waits), label=(k0, k1 - k0)))
        _attention(sb, w, c, rank, [q for q, _ in sources], lambda r, q, bh: arrived(r, q, bh))
    return sb.build(flops_per_gpu(w, c))


def build_baseline(w: Workload, c: Cluster, first_nodes: int = 0, grouped: bool = False,
                   library_tasks: bool = True, local_fold: bool = False) -> Schedule:
    """A hierarchical all-gather of K and V in one launch (without its tasks in a timing build,
    ``library_tasks=False``, whose ``local_fold`` has only local rank 0's tiles: see
    :class:`~mkernel.schedule_builder.ScheduleBuilder`), then every attention tile on all SMs."""
    return _gather_then_attend(w, c, "nccl_hier_ag_kv+attn", first_nodes, grouped, library_tasks, local_fold)


def build_paper_baseline(w: Workload, c: Cluster, first_nodes: int = 0, grouped: bool = False,
                         library_tasks: bool = True, local_fold: bool = False) -> Schedule:
    """The paper's ("FA2+NCCL"): ours, its attention at FlashAttention-2's speed in either kernel
    profile (the variant is in :data:`mkernel.cluster.FA2_VARIANTS`; module docstring)."""
    return _gather_then_attend(w, c, PAPER_BASELINE, first_nodes, grouped, library_tasks, local_fold)


@paused_gc()
def _gather_then_attend(w: Workload, c: Cluster, variant: str, first_nodes: int, grouped: bool,
                        library_tasks: bool, local_fold: bool) -> Schedule:
    check(w, c)
    g, nodes = c.gpus_per_node, c.nodes
    sb = ScheduleBuilder("ring_attention", variant, c.world, g, c.gpu.sms, first_nodes=first_nodes,
                         grouped=grouped, library_tasks=library_tasks, local_fold=local_fold)
    rows = _buffers(sb, w, c)
    ch = w.baseline_channels
    kv_bytes = 2 * c.world * rows * w.k * DTYPE_BYTES[w.dtype]  # K and V gathered in one NCCL group
    sb.launch("allgather", {Role.INTRA: ch if g > 1 else 1, Role.SEND: coll.network_sms(ch, nodes)},
              coll.nccl_call(w, "all_gather", kv_bytes))
    if sb.builds():  # not in a timing build (library_tasks=False): the call's model times it
        _all_gather_kv(sb, w, c, rows)
    sb.launch("attention", {Role.COMPUTE: c.gpu.sms})
    for rank in sb.ranks():  # slices in the order of the fused kernel (own, node, nearest nodes)
        node, local = c.node_of(rank), c.local_of(rank)
        sources = [c.rank((node + dn) % nodes, (local - h) % g) for dn in range(nodes) for h in range(g)]
        _attention(sb, w, c, rank, sources, lambda r, q, bh: ())
    return sb.build(flops_per_gpu(w, c))


def _all_gather_kv(sb: ScheduleBuilder, w: Workload, c: Cluster, rows: int) -> None:
    """The baseline's hierarchical all-gather of every rank's ``rows``-row K and V slices into KA, VA."""
    g, nodes, ch = c.gpus_per_node, c.nodes, w.baseline_channels
    rows_per_chunk = baseline_rows_per_chunk(w.baseline_chunk_kib, w.k, DTYPE_BYTES[w.dtype])
    parts = max(1, min(rows, ch // nodes if g > 1 else ch))
    for rank in sb.ranks():  # the own slice into the gathered buffers
        sb.add(rank, Role.INTRA, Op.COPY, reads=(Region("K", rank, 0, rows, 0, w.k), Region("V", rank, 0, rows, 0, w.k)),
               writes=(Region("KA", rank, rank * rows, (rank + 1) * rows, 0, w.k),
                       Region("VA", rank, rank * rows, (rank + 1) * rows, 0, w.k)),
               signals=(Signal(rank, "own"),), label="own slice")
    coll.hierarchical_all_gather(sb, c, buffers=("KA", "VA"), slot_rows=rows, cols=w.k, parts=parts,
                                 rows_per_chunk=rows_per_chunk, own=lambda r: Signal(r, "own"))


def make_inputs(w: Workload, c: Cluster, rng: np.random.Generator) -> dict[str, list[np.ndarray]]:
    """Fresh random Q, K, V slices for every rank."""
    shape = (w.n * w.m, w.k)
    return {name: [rng.standard_normal(shape, dtype=np.float32) for _ in range(c.world)] for name in ("Q", "K", "V")}
