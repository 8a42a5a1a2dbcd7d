"""GEMM+ReduceScatter's node reduction as pushes (``Workload.node_reduce = "push"``): each rank's intra
role reduce-adds its partial of a tile into the tile's node owner, instead of the owner pulling the
node's partials with peer loads (:mod:`.gemm_rs`, the default, ``"pull"``).

Why: a pull is bound by the loads an SM keeps in flight over NVLink, a few GB/s per SM on an H200
pair (docs/results/2026-11-30-nvlink.md). A push is a store: on the GPU an accumulating COPY is a
bulk reduce-add (``cp.reduce.async.bulk ... .add.noftz.bf16``) from the pusher's shared memory into
the owner's memory, added at the owner's L2 atomically per element, fire and forget; the SM waits
once, at the task's end, for the adds to complete before it signals (hw/kernels/fused.py).

Where the sums accumulate: in the owner's own partial. Rows ``[q R, (q + 1) R)`` of every rank's P
hold its partial of block q; on the node owner of block q they *are* the accumulator: its GEMM
stores its partial there (a plain store, the base), the peers add theirs into it, and the owner
copies the finished tile out. Of the two ways to start an accumulator each call, (a) zeroing it
after use (and once at allocation) or (b) a base written by a plain store that the pushes wait for,
this is (b): nothing is zeroed in any backend (the simulator's data mode and the interpreter poison
scratch with NaN, the GPU heap is not cleared), a push never depends on the previous call's state,
and the race proof sees every ordering inside one call. What (b) costs is that a push waits for
its owner's base; so every rank computes its own block first (in each group of blocks below), and
by the time a peer has a tile of that block ready the base is long written. The base store is the
owner's ordinary GEMM into P, so the compute queue stays one GEMM table on one C buffer.

Timeline on rank r (node n, local l; G ranks a node). Blocks come in groups, one per node offset
(the pull variant's order: other nodes' blocks first, own node's last; one group on one node); in
group i, block (n + dn_i, l + d) has node owner (n, l + d), and r owns d = 0::

    compute | group i: own block (d = 0) -> P, bump own[i]; then d = 1 .. G-1: tile t -> P,
            |          bump ready<d>[i T + t]                                (all local signals)
    intra   | group i: wait own[i] = T, bump base[i G + (l - l_p) mod G] on every peer p
            |          d = 1 .. G-1: tile t: wait ready<d>, base[i G + d]; P[t] +-> P@owner[t]
            |                        (accumulate), bump pushed[i T + t] on the owner
            |          own tile t: wait pushed[i T + t] = G - 1, P[t] -> OUT (one node), SEND slot
            |                        or PART (several: the pull variant's target)
    send    | as the pull variant
    recv    | as the pull variant

The copy out of a finished tile is a REDUCE of one source (a copy, summed in fp32 and rounded once:
exact): on the GPU it takes the reduce path the kernel already has for this op (box loads where the
regions tile into boxes), so the push kernel's op set is the pull's plus the accumulating copy, and
carries no register copy code (whose registers spill: hw/kernels/fused.py).

The readiness flags are named per destination (``ready<d>``): the hw GEMM table keeps rows of one
signal name and rank together when it regroups tiles for L2 (hw/lowering/plan.py), so each
destination's tiles stay in the rotated block order that spreads the pushes over the owners. With
one rank a node there is nothing to push (the pull variant's compute role writes its targets).
"""
from __future__ import annotations

import math

from ..cluster import Cluster
from ..cost import sm_work_us
from ..ir import DTYPE_BYTES, Op, Region, Role, Signal, Step, Task, Wait
from ..problems import Workload
from ..schedule_builder import ScheduleBuilder
from ._auto import MIN_INTRA_SMS, SPLIT_STEP, STATIC_INTRA_SMS, _gemm_tile_us
from ._collectives import REFERENCE_SMS
from ._tiling import runs

PUSH_MAX_INTRA_SMS = 96  # the simulator's best push split on 1 x 8 and 2 x 8 reached 80-96 (docs/results/2026-12-04-rs-push.md)
# the signals a push bumps on another local rank, whose index means the same on every rank (a build of
# local rank 0 keeps it: ScheduleBuilder.fixed): base's is the sender's local rank numbered from the
# receiver's, pushed's the group and tile
FIXED = ("base", "pushed")


def ready(c: Cluster, rank: int, position: int, t, tiles: int) -> tuple[Signal, tuple[int, int]]:
    """The signal the compute role bumps when its tile t of the block at ``position`` of its order
    (group position // G, destination position % G) is in P, and how it steps along a row of tiles."""
    group, d = divmod(position, c.gpus_per_node)
    if d == 0:  # the own block: one counter the base relay waits for whole
        return Signal(rank, "own", group), (0, 0)
    return Signal(rank, f"ready{d}", group * tiles + t.index), (0, 1)


def intra(sb: ScheduleBuilder, c: Cluster, rank: int, offsets: list[int], tiles, rows: int, chunk_period: int,
          target, moves) -> None:
    """The intra queue of ``rank``, group by group (module docstring): the base relay, the pushes,
    then the own tiles out. ``rows``: a block's rows R; ``target(rank, q, t)`` and
    ``moves(dst, t)``: the pull variant's (:func:`.gemm_rs.build`); ``chunk_period``: tiles per run of
    one target signal (a network chunk; 0 on one node)."""
    g, nodes = c.gpus_per_node, c.nodes
    node, local = c.node_of(rank), c.local_of(rank)
    n = len(tiles)

    def part(r: int, q: int, t) -> Region:  # rank r's partial (or, on q's node owner, the sum) of tile t of block q
        return Region("P", r, q * rows + t.row0, q * rows + t.row1, t.col0, t.col1)

    peers = c.node_ranks_from(rank)[1:]
    for i, dn in enumerate(offsets):
        own = c.rank((node + dn) % nodes, local)
        sb.add(rank, Role.INTRA, Op.NOP, waits=(Wait(Signal(rank, "own", i), n),),
               signals=tuple(Signal(p, "base", i * g + (local - c.local_of(p)) % g) for p in peers),
               label=f"block {own} base stored")
        for d in range(1, g):
            q, owner = c.rank((node + dn) % nodes, (local + d) % g), c.rank(node, (local + d) % g)
            base = Wait(Signal(rank, "base", i * g + d), 1)
            for run in runs(tiles):
                t = run[0]
                sb.add(rank, Role.INTRA, Op.COPY, accumulate=True, reads=(part(rank, q, t),),
                       writes=(part(owner, q, t),), waits=(Wait(Signal(rank, f"ready{d}", i * n + t.index), 1), base),
                       signals=(Signal(owner, "pushed", i * n + t.index),), label=f"block {q} tile {{}} push",
                       count=len(run), step=Step(((0, 0, t.cols),) * 2, ((0, 1),), (1, 0), label=(t.index, 1)))
        for run in runs(tiles, period=chunk_period):
            t = run[0]
            dst, sig = target(rank, own, t)
            sb.add(rank, Role.INTRA, Op.REDUCE, waits=(Wait(Signal(rank, "pushed", i * n + t.index), g - 1),),
                   reads=(part(rank, own, t),), writes=(dst,), signals=sig, label=f"block {own} tile {{}} out",
                   count=len(run), step=Step(((0, 0, t.cols), moves(dst, t)), waits=(1,), label=(t.index, 1)))


def intra_sms(w: Workload, c: Cluster, send: int, recv: int) -> int:
    """The intra SMs (per REFERENCE_SMS GPU, as role_budget expects every default) at which the
    compute role's tiles and the intra role's pushes and copies out take about as long, by
    :mod:`mkernel.cost`'s task costs (the simulator's); ``split = "static"``: the pull variant's 48.

    A push pays the fixed per-task peer cost (``fused_peer_task_us``, fitted on the pull's tasks),
    once per peer and tile where a pull pays it once per tile, so the pushes need more SMs than the
    pulls to keep the port busy: their fixed costs run side by side on the intra SMs while their
    bytes share the port (the pull variant's model, :func:`._auto.gemm_rs_intra_sms`, has the same
    two bounds); counts up to PUSH_MAX_INTRA_SMS are tried."""
    if w.split == "static":
        return STATIC_INTRA_SMS
    f = c.for_variant("fused")
    g, rows = c.gpus_per_node, w.m // c.world
    tm, tn = min(w.tile_m, rows), min(w.tile_n, w.n)
    tiles = math.ceil(rows / tm) * math.ceil(w.n / tn)
    item = {"P": DTYPE_BYTES[w.dtype], "OUT": DTYPE_BYTES[w.dtype]}
    tile = (Region("P", 0, 0, tm, 0, tn),)
    push = Task(0, 0, Role.INTRA, Op.COPY, tile, (Region("P", 1, 0, tm, 0, tn),), True)
    push_us, fixed = sm_work_us(push, item, f), f.nvlink.latency_us + f.gpu.fused_peer_task_us
    out_us = sm_work_us(Task(0, 0, Role.INTRA, Op.REDUCE, tile, (Region("OUT", 0, 0, tm, 0, tn),)), item, f)
    outs = c.nodes * tiles  # own tiles per rank; it pushes G - 1 times as many
    pushes = outs * (g - 1)
    port_us = (tm * tn * item["P"] + f.nvlink.half_efficiency_bytes) / (f.nvlink.bw_gb_per_s * 1e3)
    best, best_us = None, math.inf
    for sms in range(MIN_INTRA_SMS, min(PUSH_MAX_INTRA_SMS, c.gpu.sms - send - recv - MIN_INTRA_SMS) + 1, SPLIT_STEP):
        compute = c.gpu.sms - send - recv - sms
        compute_us = c.world * tiles * (_gemm_tile_us(tm, tn, w.k, f, compute) + f.gpu.fused_tile_us) / compute
        intra_us = max(pushes * push_us / sms, pushes * (fixed / sms + port_us)) + outs * out_us / sms
        us = max(compute_us, intra_us) + push_us + out_us  # + the last tile's push and copy out
        if us < best_us * (1 - 1e-9):
            best, best_us = sms, us
    if best is None:  # a rank's share too small to try a split: the static one, scaled down by role_budget
        return STATIC_INTRA_SMS
    return max(1, round(best * REFERENCE_SMS / c.gpu.sms)) if c.gpu.sms < REFERENCE_SMS else best
