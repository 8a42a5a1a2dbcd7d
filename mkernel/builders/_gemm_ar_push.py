"""GEMM+AllReduce's node reduction as pushes (``Workload.node_reduce = "push"``): each rank's intra role
reduce-adds its partial of a tile into the tile's node owner, instead of the owner pulling the node's
partials with peer loads (:mod:`.gemm_ar`, the default, ``"pull"``). It is GEMM+RS's push
(:mod:`._gemm_rs_push`, where the reasons are) on GEMM+AR's tiles; what follows the node sum is the
pull variant's: the inter-node exchange where there are several nodes (direct, twoshot or ring,
:mod:`._gemm_ar_net`), then the owner's broadcast of its final tile to the node's peers, one unicast
COPY pair per peer (never multicast).

Where the sums accumulate: in the owner's own partial. Every rank's P holds its partial of every
tile; on the owner of tile t (local t mod G) P[t] *is* the accumulator: its GEMM stores its partial
there (a plain store, the base), the G - 1 peers add theirs into it, and the owner copies the
finished tile out with a one-source REDUCE (exact) to PART (between nodes) or OUT (one node). Nothing
is zeroed in any backend and no push depends on the previous call; what that costs is that a push
waits for its owner's base. The compute role already makes the owner's own tile first in each slot,
so a relay per chunk of slots (the owner's own tiles of the chunk all stored) lets the peers push
that chunk; by the time a peer's tiles of the chunk are ready the base is stored or nearly so.

Timeline on rank r (local l; G ranks a node), chunk by chunk in the node's chunk order (position j,
the pull variant's; tile signals indexed as its ``rel``, so every node runs node 0's queues)::

    compute | slot by slot: own tile t -> P, bump own[j];  a peer's tile t -> P, bump ready[t]
    intra   | chunk j: wait own[j] = own tiles of the chunk, bump base[j G + (l - l_p) mod G] on each peer p
            |          each owner o = l + d, d = 1 .. G-1, its tiles t of the chunk: wait ready[t],
            |            base[j G + d]; P[t] +-> P@o[t] (accumulate), bump pushed[t] on o
            |          own tile t of the chunk: wait pushed[t] = G - 1, P[t] -> PART slot (several
            |            nodes: bump chunk_ready[j], or group_ready in a shared exchange) or OUT (one
            |            node: bump final[t])
            |          the broadcasts, lagging as the pull variant's (``_gemm_ar_intra.BCAST_LAG``)
    send    | as the pull variant
    recv    | as the pull variant

Every wait targets a task at an earlier place of some queue of the node (the relay waits only for
compute; a push for its owner's relay of the same chunk; a copy out for the pushes of the same chunk,
which sit before it in every queue), so no SM budget deadlocks. The readiness flags are local: the hw
GEMM table then signals only its own rank, and its runs of one signal name (one ``own``, G - 1
``ready`` tiles) are a slot long, so regrouping them for L2 (hw/lowering/plan.py) keeps the slot order
that spreads the pushes over the owners. With one rank a node there is nothing to push.
"""
from __future__ import annotations

from collections.abc import Callable

from ..cluster import Cluster
from ..ir import Op, Role, Signal, Step, Wait
from ..schedule_builder import ScheduleBuilder
from ._gemm_ar_net import Regions
from ._tiling import Tile, runs


def compute_groups(c: Cluster, rank: int, run: list[Tile], own_position: Callable[[Tile], int],
                   rel: Callable[[Tile], int]) -> list[tuple[list[Tile], Signal, tuple[int, int]]]:
    """A compute run of the pull variant's (tiles of one slot, along a row) as the push variant's
    groups: (tiles, the signal of the first, how it steps). The own tile starts its slot's run
    (``gemm_ar.build``'s order) and goes alone, bumping ``own`` of its chunk position; the rest bump
    ``ready`` at their signal index, which steps with the tile index inside a slot."""
    out = []
    if run[0].index % c.gpus_per_node == c.local_of(rank):
        out.append(([run[0]], Signal(rank, "own", own_position(run[0])), (0, 0)))
        run = run[1:]
    if run:
        out.append((run, Signal(rank, "ready", rel(run[0])), (0, 1)))
    return out


def chunk_pushes(sb: ScheduleBuilder, c: Cluster, rank: int, regs: Regions, owned_by: Callable[[int], list[Tile]],
                 j: int, rel: Callable[[Tile], int]) -> list[Tile]:
    """The intra role's part of the chunk at position ``j`` before its copies out (module docstring):
    the relay of the own base (where the rank owns tiles of the chunk), then the pushes of the rank's
    partials of every other owner's tiles; returns the rank's own tiles of the chunk.
    ``owned_by(local)``: that local rank's tiles of the chunk."""
    g, local = c.gpus_per_node, c.local_of(rank)
    peers = c.node_ranks_from(rank)[1:]
    mine = owned_by(local)
    if mine:
        sb.add(rank, Role.INTRA, Op.NOP, waits=(Wait(Signal(rank, "own", j), len(mine)),),
               signals=tuple(Signal(p, "base", j * g + (local - c.local_of(p)) % g) for p in peers),
               label=f"chunk {j} base stored")
    for d, owner in enumerate(peers, start=1):
        base = Wait(Signal(rank, "base", j * g + d), 1)
        for run in runs(owned_by(c.local_of(owner)), stride=g):
            t = run[0]
            sb.add(rank, Role.INTRA, Op.COPY, accumulate=True, reads=(regs.tile("P", rank, t),),
                   writes=(regs.tile("P", owner, t),), waits=(Wait(Signal(rank, "ready", rel(t)), 1), base),
                   signals=(Signal(owner, "pushed", rel(t)),), label="tile {} push", count=len(run),
                   step=Step(((0, 0, t.cols * g),) * 2, ((0, g),), (g, 0), label=(t.index, g)))
    return mine
