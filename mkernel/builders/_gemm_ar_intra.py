"""GEMM+AR's intra-node queue on one owner rank: the node sums of its tiles and their broadcasts.

The queue interleaves the broadcasts ``BCAST_LAG`` chunks behind the reductions, so the intra SMs
keep reducing while the network round trip is in flight (see :mod:`.gemm_ar` for the timeline).

Its sums and broadcasts are most of a large build (a 2 x 8 GEMM+AR 32768^2 build: 33k of its 53k
groups), so their regions, signals and waits are made inline (:func:`mkernel.slots.settable`):
a constructor's call each cost about a quarter more.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from ..cluster import Cluster
from ..ir import Op, Region, Role, Signal, Step, Wait
from ..problems import Workload
from ..schedule_builder import ScheduleBuilder
from ..slots import settable
from ._gemm_ar_net import REGION, SIGNAL, WAIT, RankNet, fin_to_out, regions_each, shared_final
from ._tiling import Tile, runs

BCAST_LAG = 2  # chunks between a chunk's reduction and its broadcast in the intra queue
STEP = settable(Step)  # (the sums' and broadcasts' steps, filled inline)


@lru_cache(maxsize=4)
def slot_tops(slots: int, tile_m: int) -> tuple[int, ...]:
    """Slot s -> its first PART row, ``s * tile_m`` (s <= ``slots``): one int object for each, taken by
    every rank's PART regions (a 2 x 8 GEMM+AR 32768^2 build: 16k regions on 16 ranks, 2k distinct
    bounds; each made anew was a MB of ints)."""
    return tuple(range(0, (slots + 1) * tile_m, tile_m))


def intra_queue(sb: ScheduleBuilder, w: Workload, c: Cluster, rank: int, peers: list[int],
                visit: list[tuple[int, int, list[Tile]]], cuts: list[list[tuple[Tile, ...]]], whole: int,
                shared: list[Tile], net: RankNet, rel: list[int], out_done: Callable[[int], Signal],
                pushes: Callable[[int], list[Tile]] | None = None) -> None:
    """Reductions of the owner's tiles in the node's chunk order, each chunk's broadcast behind them:
    ``BCAST_LAG`` chunks behind for a chunk that goes direct, the whole next group behind for one
    in a group (its final sum needs every node's part of the group); ``shared`` tiles (a shared
    exchange's) reduced first and broadcast last. With ``pushes`` (``node_reduce = "push"``:
    ``pushes(j)`` adds the relay and the pushes of the chunk at position j of the node's order and
    returns the rank's own tiles of it) every chunk's pushes come first, and each reduction is the
    copy out of the own partial once the G - 1 pushes into it have landed (:mod:`._gemm_ar_push`).
    ``cuts[ci]``: chunk ci's runs of tiles (:func:`runs`); ``rel[i]``: tile i's signal index."""
    g, nodes = len(peers), c.nodes
    lag = BCAST_LAG if nodes > 1 else 0
    last = len(visit) - 1
    after = [min(last, (j // nodes + 2) * nodes - 1) if j < whole else j + lag for j, _, _ in visit]

    bumps = tuple(out_done(p) for p in peers[1:])  # (a broadcast's: the same for each)
    parts, outs = net.parts, net.outs  # (what each tile's exchange sum takes: RankNet)
    by_g = (g,)  # (a tile's wait steps by G: its signal index is the tile's)
    # tile width -> a broadcast's step regions, a sum's step regions and signals: one object for each
    bcast_steps: dict = {}
    sum_steps: dict[bool, dict] = {True: {}, False: {}}  # (by whether the sum goes out to other nodes)
    sums_made = {out: net.steps.setdefault(("reduce", out), {}) for out in (True, False)}
    intra, others, copy_op, reduce_op = Role.INTRA, peers[1:], Op.COPY, Op.REDUCE  # (enum members read once: ~1k
    # instructions each off the class in 3.11)
    bcast_made, tile_m = net.steps.setdefault("bcast", {}), w.tile_m
    # a tile's sum step, whose label tuple its broadcast's step takes too (one object, not two equal ones)
    labelled = sums_made[nodes > 1]
    tops = slot_tops(net.regs.slots, tile_m)
    add_bcast, out_regions = sb.appender(rank, intra, copy_op, "tile {} bcast"), regions_each(g - 1)
    region_, signal_, wait_ = REGION, SIGNAL, WAIT  # (filled inline, then made so)
    step_ = STEP

    def moved(cols: int, n: int, last: tuple) -> tuple:
        """Regions' steps: ``n`` moving ``G`` tiles right, then ``last`` (if any)."""
        return ((0, 0, cols * g),) * n + ((last,) if last else ())

    sources, arrived, arrivals, what = ((peers[:1], "pushed", g - 1, "out") if pushes else
                                        (peers, "contrib", g, "reduce"))
    add_sum, p_regions = sb.appender(rank, intra, reduce_op, f"tile {{}} {what}"), regions_each(len(sources))

    nvisit = len(visit)
    shared_cut: list = []  # (the shared tiles' runs that op nvisit sums: emit's, set before each call)

    def emit(ops: list[int]) -> None:
        """The queue's sums and broadcasts in the order of ``ops``: op >= 0 sums chunk visit[op] (between
        nodes into PART, bumping its chunk_ready; on one node into OUT), op = len(visit) the shared
        tiles (bumping group_ready), and op < 0 broadcasts chunk visit[~op]. One loop, not a call a
        chunk (a 2 x 8 GEMM+AR 32768^2 build: 33k calls, about 2% of its instructions)."""
        for op in ops:
            if op < 0:
                j, ci, chunk = visit[~op]
                if j < whole:  # from FIN, once the chunk's final sum is there (summed here or arrived), to all
                    own = j % nodes == nodes - 1
                    fin_to_out(net, peers, chunk, (Wait(Signal(rank, "fin", j), len(chunk) if own else 1),))
                    continue
                for run in cuts[ci]:
                    t = run[0]
                    i, r0, r1 = t.index, t.row0, t.row1  # (3 names at once at most: more build a tuple)
                    c0, c1 = t.col0, t.col1
                    step = bcast_made.get(i)
                    if step is None:
                        regions = bcast_steps.get(t.cols)  # (validate reads each tuple object once)
                        if regions is None:
                            regions = bcast_steps[t.cols] = moved(t.cols, 2 * g - 2, ())
                        summed = labelled.get(i)
                        step = bcast_made[i] = step_()  # (inline, as new_step makes it)
                        step.regions, step.signals, step.waits = regions, (), by_g
                        step.chunk, step.label, step.period = 0, (i, g) if summed is None else summed.label, 0
                        step.outer, step.rotate = (), 0
                        step.__class__ = Step
                    # the OUT tile (as Regions.tile makes it) and its final signal, and the wait on it
                    out = region_()
                    out.buffer, out.rank, out.row0 = "OUT", rank, r0
                    out.row1, out.col0, out.col1 = r1, c0, c1
                    out.__class__ = Region
                    final = signal_()
                    final.rank, final.name, final.index = rank, "final", rel[i]
                    final.__class__ = Signal
                    wait = wait_()
                    wait.signal, wait.count = final, 1
                    wait.__class__ = Wait
                    outs[i] = out, final
                    add_bcast((out,) * (g - 1), out_regions("OUT", others, r0, r1, c0, c1), (wait,), bumps, len(run),
                              step)
                continue
            if op < nvisit:
                jv, ci, _ = visit[op]
                cut, ready = cuts[ci], None
                if nodes > 1:  # (made inline, as new_signal makes it: 16k chunks in a 2 x 8 GEMM+AR 32768^2 build)
                    ready = net.ready[jv] = signal_()
                    ready.rank, ready.name, ready.index = rank, "chunk_ready", jv
                    ready.__class__ = Signal
            else:
                cut, ready = shared_cut, Signal(rank, "group_ready")
            between = ready is not None
            steps, sig, made = sum_steps[between], (ready,), sums_made[between]
            for run in cut:
                t = run[0]
                i, r0, r1 = t.index, t.row0, t.row1
                c0, c1 = t.col0, t.col1
                step = made.get(i)
                if step is None:
                    moves = steps.get(t.cols)
                    if moves is None:
                        moves = steps[t.cols] = (
                            (moved(t.cols, len(sources), (0, w.tile_m, 0)), ((0, 0),)) if between else
                            (moved(t.cols, len(sources), (0, 0, t.cols * g)), ((0, g), (0, 0))))
                    step = made[i] = step_()  # (inline, as new_step makes it)
                    step.regions, step.signals, step.waits = moves[0], moves[1], by_g
                    step.chunk, step.label, step.period = 0, (i, g), 0
                    step.outer, step.rotate = (), 0
                    step.__class__ = Step
                dst = region_()  # (PART and OUT as Regions.slot and .tile place them)
                if between:
                    s = i // g
                    top = tops[s]
                    dst.buffer, dst.rank, dst.row0 = "PART", rank, top
                    dst.row1, dst.col0, dst.col1 = tops[s + 1] if t.rows == tile_m else top + t.rows, 0, t.cols
                    dst.__class__ = Region
                    parts[i] = dst
                else:
                    dst.buffer, dst.rank, dst.row0 = "OUT", rank, r0
                    dst.row1, dst.col0, dst.col1 = r1, c0, c1
                    dst.__class__ = Region
                    sig = (Signal(rank, "final", rel[i]), out_done(rank))
                flag = signal_()  # (the partials' arrivals, waited on)
                flag.rank, flag.name, flag.index = rank, arrived, rel[i]
                flag.__class__ = Signal
                wait = wait_()
                wait.signal, wait.count = flag, arrivals
                wait.__class__ = Wait
                add_sum(p_regions("P", sources, r0, r1, c0, c1), (dst,), (wait,), sig, len(run), step)

    if pushes is None:
        shared_cut = runs(shared, stride=g)
    ops = [nvisit]  # (the shared tiles' sums first)
    reduced = sent = 0  # visit[sent:reduced]: the chunks reduced, their broadcasts pending (positions, not a deque
    # of tuples: 16k chunks in a 2 x 8 GEMM+AR 32768^2 build)
    pushed, first_shared = set(), {t.index for t in shared}  # own tiles whose chunk's pushes are queued
    # pushes: every chunk of the compute order, then each chunk of the rank's own whose tiles they cover
    # (a shared exchange's tiles go first, so its chunks and the compute's are numbered apart)
    for j in range(net.nchunks) if pushes else (None,):
        if pushes:
            mine = pushes(j)
            shared_cut = runs([t for t in mine if t.index in first_shared], stride=g)
            pushed.update(t.index for t in mine)
        while reduced <= last and (pushes is None or all(t.index in pushed for t in visit[reduced][2])):
            jv = visit[reduced][0]
            ops.append(reduced)
            reduced += 1
            while sent < reduced and after[sent] <= jv:
                ops.append(~sent)
                sent += 1
        if pushes:  # (before the next chunk's pushes)
            emit(ops)
            ops = [nvisit]
    if not pushes:  # (with pushes, every chunk's ops went out in the loop)
        emit(ops)
    emit([~s for s in range(sent, reduced)])
    if shared:  # the shared pieces are final together
        fin_to_out(net, peers, shared, shared_final(rank, nodes))
