"""Launches of independent GEMM tiles played without events (sim/tiles.py): every figure of the run
is the event loop's, bit for bit, whatever the tiles' shapes or the SM budget."""
from __future__ import annotations

import dataclasses
from collections import defaultdict

import pytest

from mkernel import Workload, builders, load_scenario
from mkernel.ir import Op, Role, Task
from mkernel.sim import SimBackend, tiles
from mkernel.sim.collapse import collapse
from mkernel.sim.engine import Model

# ragged edges, more tiles than SMs, K deep enough that a tile's time follows its SM's speed class
CASES = [("gemm_ar", dict(m=4000, n=4100, k=1024)), ("gemm_rs", dict(m=8000, n=2100, k=1024)),
         ("ag_gemm", dict(m=6000, n=2100, k=1024)),
         ("moe_dispatch_gemm", dict(m=4096, n=256, k=1024, experts=16, topk=3, tile_m=16, tile_n=32, routing="shifted"))]


def cluster(nodes: int, gpus: int, **gpu):
    """The paper testbed's cluster (measured kernels: an SM's GEMM speed depends on how many compute)."""
    c = load_scenario("paper-ib-2x8").cluster
    return dataclasses.replace(c, nodes=nodes, gpus_per_node=gpus, gpu=dataclasses.replace(c.gpu, **gpu))


def _runs(s, c, monkeypatch, **kw):
    """(the run as played, the run through the event loop), each as its figures (collapsed, unless
    ``kw`` says otherwise)."""
    out = []
    for played in (True, False):
        with monkeypatch.context() as mp:
            if not played:
                mp.setattr(tiles, "plain", lambda *a: False)
            r = SimBackend().run(s, c, **{"collapse": True, **kw})
        out.append((r.time_s, r.per_rank_s, r.bytes_total, r.metrics["breakdown_us"], r.hazards))
    return out


def _ends(s, c, monkeypatch) -> tuple[dict, dict]:
    """The sorted compute tile ends of each rank whose launch is played in a quiet run, (played,
    through the event loop)."""
    played: dict = defaultdict(list)
    looped: dict = defaultdict(list)
    worked, tile_ends = Model._worked, tiles.tile_ends

    def spy(self, runs):
        for run in runs:
            if run.role is Role.COMPUTE:
                looped[run.lane.rank] += [self.env.now] * run.n
        worked(self, runs)

    def ends(m, rank, li, launch):
        played[rank] += tile_ends(m, rank, li, launch)
        return tile_ends(m, rank, li, launch)

    with monkeypatch.context() as mp:
        mp.setattr(tiles, "tile_ends", ends)
        m = Model(s, c, None, track_hazards=False)
        m.played = _Unkept()  # every rank plays its own launch (not one per kind), so each is compared
        m.run()
        mp.setattr(tiles, "plain", lambda *a: False)
        mp.setattr(Model, "_worked", spy)
        Model(s, c, None, track_hazards=False).run()
    return {r: sorted(e) for r, e in played.items()}, {r: sorted(looped[r]) for r in played}


class _Unkept(dict):
    """A cache that keeps nothing."""

    def __setitem__(self, key, value) -> None:
        pass


@pytest.mark.python_core
@pytest.mark.parametrize("kernel,shape", CASES, ids=[k for k, _ in CASES])
def test_a_played_launch_ends_where_the_event_loop_ends_it(monkeypatch, kernel, shape):
    """Every tile ends where the event loop ends it (each SM's speed class, the order they take the
    tiles), so the launch and the run end there too."""
    c = cluster(2, 4)
    w = Workload(kernel=kernel, **shape)
    played, looped = _ends(collapse(builders.get(kernel).build_baseline(w, c, first_nodes=1, grouped=True, library_tasks=False), 1),
                           c, monkeypatch)
    assert played and played == looped
    s = builders.get(kernel).build_baseline(w, c, grouped=True, library_tasks=False)
    played, looped = _runs(s, c, monkeypatch)
    assert played == looped
    played, looped = _runs(s, c, monkeypatch, collapse=False)  # every node, hazards tracked
    assert played == looped


@pytest.mark.python_core
def test_fewer_tiles_than_sms_and_an_odd_budget(monkeypatch):
    """6 tiles on 132 SMs (no second wave), and 150 on a 7-SM GPU (many)."""
    for sms, m in ((132, 256), (7, 6400)):
        c = cluster(2, 2, sms=sms)
        s = builders.get("gemm_ar").build_baseline(Workload(kernel="gemm_ar", m=m, n=768, k=1024), c, grouped=True,
                                                     library_tasks=False)
        assert s.launches[0].budget(Role.COMPUTE) == sms
        played, looped = _runs(s, c, monkeypatch)
        assert played == looped


def test_launches_that_something_observes_are_not_played():
    c = cluster(2, 2, fused_tile_us=0.0)
    fused = builders.get("gemm_ar").build(Workload(kernel="gemm_ar", m=512, n=512, k=64), c)
    base = builders.get("gemm_ar").build_baseline(Workload(kernel="gemm_ar", m=512, n=512, k=64), c)
    quiet = Model(base, c, None, track_hazards=False)
    assert not tiles.plain(Model(fused, c, None, track_hazards=False), 0, 0, fused.launches[0])  # roles, signals
    assert tiles.plain(quiet, 0, 0, base.launches[0])
    # tracked: played where only the rank's later launches read what its tiles write
    assert tiles.plain(Model(base, c, None, track_hazards=True), 0, 0, base.launches[0])
    pulled = dataclasses.replace(base, tasks=base.tasks + (Task(  # rank 1's allreduce reads rank 0's first tile
        len(base.tasks), 1, Role.INTRA, Op.COPY, reads=(quiet.queues[(0, 0, Role.COMPUTE)][0].writes[0],),
        writes=(dataclasses.replace(quiet.queues[(0, 0, Role.COMPUTE)][0].writes[0], rank=1),), launch=1),))
    assert tiles.plain(Model(pulled, c, None, track_hazards=False), 0, 0, base.launches[0])
    assert not tiles.plain(Model(pulled, c, None, track_hazards=True), 0, 0, base.launches[0])
    assert tiles.plain(Model(pulled, c, None, track_hazards=True), 1, 0, base.launches[0])
    alone = dataclasses.replace(base, variant="fused", launches=base.launches[:1],
                                tasks=tuple(t for t in base.tasks if t.launch == 0))
    tiled = dataclasses.replace(c, gpu=dataclasses.replace(c.gpu, fused_tile_us=0.5))
    assert tiles.plain(Model(alone, c, None, track_hazards=False), 0, 0, alone.launches[0])
    assert not tiles.plain(Model(alone, tiled, None, track_hazards=False), 0, 0, alone.launches[0])  # per-tile cost
    assert all(t.op is Op.GEMM and t.role is Role.COMPUTE for t in quiet.queues[(0, 0, Role.COMPUTE)])


def test_a_launch_that_starts_late_ends_at_its_end_time_itself():
    """The played end is scheduled at that time (call_at), not now plus the difference: from
    2.3634577631987064, a delay of 48.58026225446677 - now lands on ...774."""
    from mkernel.sim.environment import CountingEnvironment

    start, end, seen = 2.3634577631987064, 48.58026225446677, []
    assert start + (end - start) != end
    env = CountingEnvironment()
    env.call_later(start, lambda _a: env.call_at(end, lambda _b: seen.append(env.now)))
    env.run()
    assert seen == [end]


def test_launches_alike_share_one_play_and_launches_unlike_do_not():
    """A played launch's end is kept per kind (start, SM budget, each entry's cost and count): a rank
    whose queue has fewer tiles, or a launch started later, is played afresh and ends where its own
    tiles do."""
    c = cluster(2, 2)
    s = builders.get("gemm_ar").build_baseline(Workload(kernel="gemm_ar", m=4000, n=4100, k=1024), c, grouped=True,
                                                library_tasks=False)
    m = Model(s, c, None, track_hazards=False)
    launch = s.launches[0]
    queue = m.queues[(1, 0, Role.COMPUTE)]
    grown = max(range(len(queue)), key=lambda i: queue[i].count)  # rank 1: its largest group's tiles but one gone
    m.queues[(1, 0, Role.COMPUTE)] = [*queue[:grown], dataclasses.replace(queue[grown], count=1), *queue[grown + 1:]]

    def own(rank):  # the launch's end, played for this rank alone
        return max(tiles.tile_ends(m, rank, 0, launch))

    ends = {rank: tiles.launch_end(m, rank, 0, launch) for rank in (0, 1, 2)}
    assert ends == {rank: own(rank) for rank in (0, 1, 2)} and ends[0] == ends[2] != ends[1]
    assert len(m.played) == 2  # ranks 0 and 2 alike
    m.env.run(until=7.25)
    assert tiles.launch_end(m, 3, 0, launch) == own(3) == ends[0] + 7.25 and len(m.played) == 3
