"""MoE Dispatch + grouped GEMM (expert parallelism), fused and unfused.

Shape fields: ``m`` is the total tokens T (T / world per rank), ``k`` the hidden size H, ``n`` the
expert width I; ``experts`` (experts / world per GPU), ``topk``, ``routing`` (uniform, zipf, shifted,
zipf_shifted, or multinomial, the paper bench's draw; only the shifted ones are node-symmetric, so only they build for the first nodes
alone) and
``routing_seed`` pick the seeded routing (:mod:`mkernel.routing`, which also fixes the expert-input
layout). Inputs per rank: X (tokens x H), W (local experts x H rows, I columns), Z (one zero row).
Output per rank: Y, one row per (token, local expert) pair in layout order, zero rows after them up
to the largest rank's count (the buffers are symmetric).

Unfused equivalent::

    XE_d = all_to_all(X_r rows routed to d's experts)       # tokens reach their experts' GPUs
    Y_d[expert j rows] = XE_d[expert j rows] @ W_d[j]       # grouped GEMM

Fused schedule (design §6)::

    intra   | node destinations: gather each (local expert, source) segment straight into the
            | destination's expert input over NVLink, TOKEN_BLOCK tokens per gather, expert by expert,
            | each expert's destinations from this rank on (no two writers on one NVLink ingress)
    send    | other nodes, a chunk of CHUNK_BYTES at a time: put every token straight from X (as the
            | reference code does) where the rows the node does not need cost less network time than
            | staging the ones it does (_zero_copy); else gather the tokens routed there once (each
            | token once per node, not once per expert or GPU) and put each chunk once it is staged
    intra   | rail peer: gather what arrived into its node's expert inputs, TOKEN_BLOCK tokens at a
            | time, each block once the chunks holding its tokens have landed (one flag per chunk)
    compute | the grouped GEMM in input-availability order: tiles whose rows came from this rank's
            | own tokens first, then the node's, then other nodes'; the zero tail in tile_m-row tasks

Baseline ("nccl_a2a+grouped_gemm"): an all-to-all that sends each token once per destination GPU
(over the network to GPUs of other nodes), then the grouped GEMM on all SMs.

The paper's baseline ("nccl_even_a2a+dense_gemm", :func:`build_paper_baseline`): an even
all-to-all, every pair of ranks exchanging the same count of rows, one row per (token, expert)
copy, padded to the largest pair's, then one dense, ungrouped GEMM over every received row. Its
data path is ours (so a data run checks it the same way); its timing run takes the times of those
two library calls (``Launch.library``): NCCL's alltoall of the padded buffers and a cuBLAS GEMM
of world x pad rows.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..cluster import Cluster
from ..errors import ProblemError
from ..ir import DTYPE_BYTES, BufferKind, Library, Op, Region, Role, Schedule, Signal, Step, Wait, paused_gc
from ..problems import Workload
from ..routing import SHIFTED, Routing, routing_for
from ..schedule_builder import ScheduleBuilder
from . import _collectives as coll
from ._tiling import chunk_rows

CHUNK_BYTES = 512 * 1024  # network chunk (design §6)
TOKEN_BLOCK = 16  # tokens per dispatch unit (design §6): each gather moves at most this many
DEFAULT_INTRA_SMS = 16  # per 132 SMs, with one GPU per node (gathers from local HBM)
DEFAULT_NODE_INTRA_SMS = 48  # with NVLink peers: measured best 48 on an H200 pair (2026-11-30-nvlink.md)
DEFAULT_SEND_SMS = 4


def check(w: Workload, c: Cluster) -> None:
    w.require_positive("m", "n", "k", "tile_m", "tile_n", "experts", "topk")
    if w.m % c.world or w.experts % c.world:
        raise ProblemError(f"moe_dispatch_gemm gives every one of the {c.world} ranks m / world tokens and "
                           f"experts / world experts, so both must be multiples of {c.world}; got m={w.m}, "
                           f"experts={w.experts}")
    if w.routes:
        per = w.m // c.world
        shape_ok = len(w.routes) == c.world and all(len(r) == per and all(len(t) == w.topk for t in r)
                                                    for r in w.routes)
        if not shape_ok:
            raise ProblemError(f"moe_dispatch_gemm's routes must give each of the {c.world} ranks {per} tokens "
                               f"x topk={w.topk} expert ids")
        for rank, r in enumerate(w.routes):
            for token, ids in enumerate(r):
                if len(set(ids)) != len(ids) or not all(0 <= e < w.experts for e in ids):
                    raise ProblemError(f"moe_dispatch_gemm: rank {rank} token {token} routes to {list(ids)}; "
                                       f"each token needs topk distinct experts in [0, {w.experts})")
    if w.topk > w.experts:
        raise ProblemError(f"moe_dispatch_gemm routes each token to topk={w.topk} distinct experts, more than "
                           f"the {w.experts} experts")
    if _roles(w, c)[Role.COMPUTE] < 1:
        raise ProblemError(f"moe_dispatch_gemm leaves no compute SMs of {c.gpu.sms}")


def flops_per_gpu(w: Workload, c: Cluster) -> float:
    """2 * T * topk * H * I / world."""
    return 2.0 * w.m * w.topk * w.k * w.n / c.world


def _roles(w: Workload, c: Cluster) -> dict[Role, int]:
    # the dispatch is HBM-bound gathers even on one GPU: one SM moved 65,536 rows at 1/50 of HBM speed
    return coll.role_budget(w, c, {Role.INTRA: DEFAULT_NODE_INTRA_SMS if c.gpus_per_node > 1 else DEFAULT_INTRA_SMS,
                                   Role.SEND: DEFAULT_SEND_SMS if c.nodes > 1 else 0})


def _buffers(sb: ScheduleBuilder, w: Workload, c: Cluster, rows: int, received: int, staged: bool = True) -> None:
    per = w.m // c.world
    sb.buffer("X", per, w.k, w.dtype, BufferKind.INPUT)
    sb.buffer("W", (w.experts // c.world) * w.k, w.n, w.dtype, BufferKind.INPUT)
    sb.buffer("Z", 1, w.n, w.dtype, BufferKind.INPUT)
    sb.buffer("XE", max(rows, 1), w.k, w.dtype)
    sb.buffer("Y", max(rows, 1), w.n, w.dtype, BufferKind.OUTPUT)
    if received and staged:
        sb.buffer("SEND", received, w.k, w.dtype)
    if received:
        sb.buffer("RECV", received, w.k, w.dtype)


def _gemm(sb, w: Workload, c: Cluster, d: int, segs, rows: int, waits_for) -> None:
    """The grouped GEMM of rank d: per expert, tile_m x tile_n tiles over its rows, ordered by the
    latest source each tile needs; then zero rows after d's last row. A row of tiles waits on the
    same blocks, so its columns of one width are one group."""
    order = {r: i for i, r in enumerate(sorted({s.source for s in segs}, key=lambda r: _distance(c, d, r)))}
    tiles, by_expert = [], {}
    for s in segs:
        by_expert.setdefault(s.expert, []).append(s)
    for j, mine in sorted(by_expert.items()):
        r0, r1 = mine[0].row0, mine[-1].row0 + len(mine[-1].tokens)
        for t0 in range(r0, r1, w.tile_m):
            t1 = min(r1, t0 + w.tile_m)
            need = [s for s in mine if s.row0 < t1 and t0 < s.row0 + len(s.tokens)]
            tiles.append((max(order[s.source] for s in need), j, t0, t1, waits_for(need, t0, t1)))
    width, ragged = min(w.tile_n, w.n), w.n % w.tile_n if w.n > w.tile_n else 0
    columns = [(0, w.n // width, width)] + ([(w.n - ragged, 1, ragged)] if ragged else [])
    for _, j, t0, t1, waits in sorted(tiles, key=lambda t: t[0]):
        for c0, count, cols in columns:
            sb.add(d, Role.COMPUTE, Op.GEMM, waits=waits, label=f"expert {j} rows {t0} cols {{}}",
                   reads=(Region("XE", d, t0, t1, 0, w.k), Region("W", d, j * w.k, (j + 1) * w.k, c0, c0 + cols)),
                   writes=(Region("Y", d, t0, t1, c0, c0 + cols),), count=count,
                   step=Step(((0, 0, 0), (0, 0, cols), (0, 0, cols)), label=(c0, cols)))
    used = sum(len(s.tokens) for s in segs)
    # zero rows up to the symmetric size, tile_m rows a task so every compute SM shares the fill (at
    # HBM's rate, not one SM's stream rate: skewed routing leaves the least-loaded rank tens of MB)
    for z0, z1 in chunk_rows(used, rows, w.tile_m):
        sb.add(d, Role.COMPUTE, Op.GATHER, reads=(Region("Z", d, 0, 1, 0, w.n),),
               writes=(Region("Y", d, z0, z1, 0, w.n),), index=(0,) * (z1 - z0), label=f"zero tail rows {z0}")


def _blocks(s) -> list[tuple[int, int, tuple[int, ...]]]:
    """(block no, first row, tokens) of a segment's TOKEN_BLOCK-token dispatch units."""
    return [(b, s.row0 + i, s.tokens[i:i + TOKEN_BLOCK]) for b, i in enumerate(range(0, len(s.tokens), TOKEN_BLOCK))]


def _distance(c: Cluster, d: int, r: int) -> tuple[int, int]:
    """Own tokens first, then the node's, then other nodes' nearest first."""
    return ((c.node_of(r) - c.node_of(d)) % c.nodes, (c.local_of(r) - c.local_of(d)) % c.gpus_per_node)


def _zero_copy(needed: int, tokens: int, stage_us_per_row: float, row_bytes: int, c: Cluster,
               crosses: bool) -> bool:
    """Whether a source puts all its ``tokens`` rows to a node straight from X rather than staging
    the ``needed`` ones: when the network time of the rows the node does not need is below the
    send SMs' time to stage the rows it does (each row read and written at their stream rate). The
    unneeded rows move at the rate they get: the NIC's, or where they cross an oversubscribed spine
    (``crosses``: the node is in another leaf group) the NIC's share of it.
    The reference code puts its whole token buffer to every node, zero-copy (design section 9): at
    2 nodes and top-8 almost every token is needed there (all but 0.4% under uniform routing); at
    64 nodes about one in eight is, so staging wins."""
    rate = c.nic.gb_per_s * (c.fabric.crossing_share(c.nodes) if crosses else 1.0)
    extra_us = (tokens - needed) * row_bytes / (rate * 1e3)
    return extra_us < needed * stage_us_per_row


def node_symmetric(w: Workload) -> bool:
    """Only the shifted routings repeat node 0's routing on every node (:mod:`mkernel.routing`)."""
    return w.routing in SHIFTED and not w.routes


@paused_gc()
def build(w: Workload, c: Cluster, first_nodes: int = 0, grouped: bool = False) -> Schedule:
    """The fused schedule (only the first nodes' tasks with ``first_nodes``: see ScheduleBuilder)."""
    check(w, c)
    g = c.gpus_per_node
    sb = ScheduleBuilder("moe_dispatch_gemm", "fused", c.world, g, c.gpu.sms, first_nodes=first_nodes, grouped=grouped)
    routing = routing_for(w, c.nodes, g)
    built = sb.ranks()
    per, row_bytes, roles = w.m // c.world, w.k * DTYPE_BYTES[w.dtype], _roles(w, c)
    send_sms = roles[Role.SEND]  # none on one node: nothing is sent
    stage_us_per_row = 2 * row_bytes / (max(send_sms, 1) * c.gpu.sm_stream_gb_per_s * 1e3)

    @functools.cache
    def sent(r: int, m: int) -> tuple[tuple[int, ...], bool]:
        """Source r's tokens for node m, and whether they are put straight from X (all of them)."""
        toks = routing.to_ranks(r, m * g, (m + 1) * g)  # each token routed there, once per node
        crosses = c.fabric.group_of(c.node_of(r)) != c.fabric.group_of(m)
        return ((tuple(range(per)), True) if _zero_copy(len(toks), per, stage_us_per_row, row_bytes, c, crosses)
                else (toks, False))

    rows = max(routing.rows(d) for d in built)
    per_node = max((len(sent(r, m)[0]) for r in built for m in range(c.nodes) if m != c.node_of(r)), default=0)
    staging = any(not sent(r, m)[1] for r in built for m in range(c.nodes) if m != c.node_of(r))
    _buffers(sb, w, c, rows, c.nodes * per_node, staging)
    sb.launch("fused", roles)
    chunk = max(1, CHUNK_BYTES // row_bytes)
    chunks = -(-per // chunk)  # the most chunks one source puts to one node

    def arrived(p: int, r: int, ci: int) -> Signal:
        return Signal(p, "arrived", c.relative(r, p) * chunks + ci)
    most = max((len(_blocks(s)) for d in built for s in routing.segments(d)), default=1)

    def block_signal(s, b: int) -> Signal:
        return Signal(s.dest, "block", (s.expert * c.world + c.relative(s.source, s.dest)) * most + b)

    def blocks_in(need, t0: int, t1: int) -> tuple[Wait, ...]:
        """The waits for the blocks of segments ``need`` that hold rows [t0, t1) (each a segment's
        rows from its first, ``TOKEN_BLOCK`` at a time: those from the one t0 falls in, or the first,
        to the one t1 - 1 falls in, or the last)."""
        waits = []
        for s in need:
            first = max(0, (t0 - s.row0) // TOKEN_BLOCK)
            last = min((len(s.tokens) - 1) // TOKEN_BLOCK, (t1 - 1 - s.row0) // TOKEN_BLOCK)
            base = block_signal(s, 0)
            waits += [Wait(Signal(base.rank, base.name, base.index + b), 1) for b in range(first, last + 1)]
        return tuple(waits)

    for r in built:
        node = c.node_of(r)
        # node destinations, straight into their expert inputs: expert by expert (a GEMM tile needs its
        # expert's rows from every source), each expert's destinations from r on (Cluster.node_ranks_from)
        mine = [(s.expert, i, s) for i, d in enumerate(c.node_ranks_from(r)) for s in routing.from_source(d, r)]
        for _, _, s in sorted(mine, key=lambda e: e[:2]):
            for b, row, toks in _blocks(s):
                sb.add(r, Role.INTRA, Op.GATHER, reads=(Region("X", r, 0, per, 0, w.k),),
                       writes=(Region("XE", s.dest, row, row + len(toks), 0, w.k),), index=toks,
                       signals=(block_signal(s, b),), label=f"tokens to rank {s.dest} expert {s.expert} block {b}")
        for dn in range(1, c.nodes):  # other nodes: once per node, to the rail peer
            m = (node + dn) % c.nodes
            (toks, straight), peer = sent(r, m), c.rank(m, c.local_of(r))
            if not toks:
                continue
            base, dst = m * per_node, node * per_node
            for ci, (r0, r1) in enumerate(chunk_rows(0, len(toks), chunk)):  # chunk by chunk, so the first
                # put leaves after one chunk, not the whole buffer (and staging SMs work in parallel)
                waits, source = (), Region("X", r, r0, r1, 0, w.k)
                if not straight:
                    staged = Signal(r, "staged", dn * per_node + ci)
                    sb.add(r, Role.SEND, Op.GATHER, reads=(Region("X", r, 0, per, 0, w.k),),
                           writes=(Region("SEND", r, base + r0, base + r1, 0, w.k),), index=toks[r0:r1],
                           signals=(staged,), label=f"tokens for node {m} chunk {ci}")
                    waits, source = (Wait(staged, 1),), Region("SEND", r, base + r0, base + r1, 0, w.k)
                sb.add(r, Role.SEND, Op.PUT, chunk=ci, waits=waits, reads=(source,),
                       writes=(Region("RECV", peer, dst + r0, dst + r1, 0, w.k),), signals=(arrived(peer, r, ci),),
                       label=f"tokens of rank {r} chunk {ci} to node {m}")
    for p in built:  # rail peers fan out what arrived from other nodes, each block once its chunks landed
        for dn in range(1, c.nodes):
            r = c.rank((c.node_of(p) + dn) % c.nodes, c.local_of(p))
            toks = sent(r, c.node_of(p))[0]
            if not toks:
                continue
            where = {t: i for i, t in enumerate(toks)}
            base = c.node_of(r) * per_node
            fan = []
            for d in c.node_ranks_from(p):
                for s in routing.from_source(d, r):
                    for b, row, part in _blocks(s):
                        at = [where[t] for t in part]
                        first, last = at[0] // chunk, at[-1] // chunk  # at ascends: the block's tokens do
                        fan.append((last, d, s, b, row, at, first))
            for last, d, s, b, row, at, first in sorted(fan, key=lambda f: f[0]):  # in arrival order
                lo, hi = first * chunk, min(len(toks), (last + 1) * chunk)
                sb.add(p, Role.INTRA, Op.GATHER, waits=tuple(Wait(arrived(p, r, ci), 1) for ci in range(first, last + 1)),
                       reads=(Region("RECV", p, base + lo, base + hi, 0, w.k),),
                       writes=(Region("XE", d, row, row + len(at), 0, w.k),),
                       index=tuple(i - lo for i in at), signals=(block_signal(s, b),),
                       label=f"tokens of rank {r} to rank {d} expert {s.expert} block {b}")
    for d in built:
        _gemm(sb, w, c, d, routing.segments(d), rows, blocks_in)
    return sb.build(flops_per_gpu(w, c))


@paused_gc()
def build_baseline(w: Workload, c: Cluster, first_nodes: int = 0, grouped: bool = False,
                   library_tasks: bool = True) -> Schedule:
    """An all-to-all (each token once per destination GPU), then the grouped GEMM on all SMs (the
    all-to-all without its tasks in a timing build, ``library_tasks=False``: see
    :class:`~mkernel.schedule_builder.ScheduleBuilder`)."""
    return _a2a_then_gemm(w, c, first_nodes, grouped, library_tasks, paper=False)


@paused_gc()
def build_paper_baseline(w: Workload, c: Cluster, first_nodes: int = 0, grouped: bool = False,
                         library_tasks: bool = True) -> Schedule:
    """The paper's: an even all-to-all of (token, expert) rows, then one dense GEMM (module docstring);
    both library calls, without tasks in a timing build."""
    return _a2a_then_gemm(w, c, first_nodes, grouped, library_tasks, paper=True)


def _a2a_then_gemm(w: Workload, c: Cluster, first_nodes: int, grouped: bool, library_tasks: bool,
                   paper: bool) -> Schedule:
    check(w, c)
    variant = "nccl_even_a2a+dense_gemm" if paper else "nccl_a2a+grouped_gemm"
    sb = ScheduleBuilder("moe_dispatch_gemm", variant, c.world, c.gpus_per_node, c.gpu.sms,
                         first_nodes=first_nodes, grouped=grouped, library_tasks=library_tasks)
    routing = routing_for(w, c.nodes, c.gpus_per_node)
    built = sb.ranks()
    per_dest = functools.cache(lambda r, d: routing.to_ranks(r, d, d + 1))
    rows = max(routing.rows(d) for d in built)
    counts = {r: routing.tokens_to(r) for r in built}  # len(per_dest(r, d)) for every d
    slot = max((int(n) for r in built for d, n in enumerate(counts[r]) if c.node_of(d) != c.node_of(r)), default=0)
    _buffers(sb, w, c, rows, c.world * slot)
    row_bytes = w.k * DTYPE_BYTES[w.dtype]
    if paper:  # every pair sends the largest pair's count of (token, expert) rows
        pad = max(int(routing.pairs_to(r).max()) for r in built)
        a2a, gemm = coll.nccl_call(w, "alltoall", c.world * pad * row_bytes), Library("gemm", shape=(c.world * pad, w.n, w.k))
    else:  # each rank sends each of its tokens once to every GPU holding one of its experts
        sent = max(int(counts[r].sum()) for r in built)
        a2a, gemm = coll.nccl_call(w, "alltoall", sent * row_bytes), None
    ch = w.baseline_channels
    sb.launch("alltoall", {Role.INTRA: ch, Role.SEND: coll.network_sms(ch, c.nodes)}, a2a)
    if sb.builds():  # not in a timing build (library_tasks=False): the call's model times it
        _all_to_all(sb, w, c, routing, per_dest, slot)
    sb.launch("dense_gemm" if paper else "grouped_gemm", {Role.COMPUTE: c.gpu.sms}, gemm)
    for d in built if sb.builds() else ():
        _gemm(sb, w, c, d, routing.segments(d), rows, lambda need, t0, t1: ())
    return sb.build(flops_per_gpu(w, c))


def _all_to_all(sb: ScheduleBuilder, w: Workload, c: Cluster, routing: Routing, per_dest, slot: int) -> None:
    """The baselines' all-to-all: rows gathered to peers in the node, staged and put to other nodes'
    RECV slots (``slot`` rows per source), unpacked there into the expert inputs XE."""
    built = sb.ranks()
    tokens = w.m // c.world

    def nearest(rank: int) -> list[int]:  # every rank, this rank's node first, then the next nodes
        return [c.rank((c.node_of(rank) + dn) % c.nodes, local) for dn in range(c.nodes)
                for local in range(c.gpus_per_node)]

    for r in built:
        for d in nearest(r):
            if c.node_of(d) == c.node_of(r):
                for s in routing.from_source(d, r):
                    sb.add(r, Role.INTRA, Op.GATHER, reads=(Region("X", r, 0, tokens, 0, w.k),),
                           writes=(Region("XE", d, s.row0, s.row0 + len(s.tokens), 0, w.k),), index=s.tokens,
                           signals=(Signal(d, "in_done"),), label=f"a2a to rank {d} expert {s.expert}")
            elif per_dest(r, d):
                toks = per_dest(r, d)
                staged = Signal(r, "staged", c.relative(d, r))
                sb.add(r, Role.SEND, Op.GATHER, reads=(Region("X", r, 0, tokens, 0, w.k),),
                       writes=(Region("SEND", r, d * slot, d * slot + len(toks), 0, w.k),), index=toks,
                       signals=(staged,), label=f"a2a stage for rank {d}")
                sb.add(r, Role.SEND, Op.PUT, chunk=c.relative(d, r), waits=(Wait(staged, 1),),
                       reads=(Region("SEND", r, d * slot, d * slot + len(toks), 0, w.k),),
                       writes=(Region("RECV", d, r * slot, r * slot + len(toks), 0, w.k),),
                       signals=(Signal(d, "arrived", c.relative(r, d)),), label=f"a2a to rank {d}")
    for d in built:  # unpack what other nodes sent into the expert inputs
        for r in nearest(d):
            toks = per_dest(r, d) if c.node_of(d) != c.node_of(r) else ()
            if not toks:
                continue
            where = {t: i for i, t in enumerate(toks)}
            for s in routing.from_source(d, r):
                sb.add(d, Role.INTRA, Op.GATHER, waits=(Wait(Signal(d, "arrived", c.relative(r, d)), 1),),
                       reads=(Region("RECV", d, r * slot, r * slot + len(toks), 0, w.k),),
                       writes=(Region("XE", d, s.row0, s.row0 + len(s.tokens), 0, w.k),),
                       index=tuple(where[t] for t in s.tokens), signals=(Signal(d, "in_done"),),
                       label=f"a2a unpack from rank {r} expert {s.expert}")
    coll.drain(sb, "in_done")


def make_inputs(w: Workload, c: Cluster, rng: np.random.Generator) -> dict[str, list[np.ndarray]]:
    """Fresh random tokens and expert weights for every rank (scaled so outputs stay O(1))."""
    per_gpu = w.experts // c.world
    return {"X": [rng.standard_normal((w.m // c.world, w.k), dtype=np.float32) for _ in range(c.world)],
            "W": [(rng.standard_normal((per_gpu * w.k, w.n), dtype=np.float32) / math.sqrt(w.k)).astype(np.float32)
                  for _ in range(c.world)],
            "Z": [np.zeros((1, w.n), dtype=np.float32) for _ in range(c.world)]}
