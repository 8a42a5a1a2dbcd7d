"""Builds of local rank 0 alone (``local_fold``, issue 30): the fused schedule a collapsed run folds
to, built directly instead of built for every local rank and then checked and folded.

What makes it exact is that the build equals what :mod:`mkernel.sim.localfold` makes of the full
build of the same nodes, member for member (bumps of signals nobody waits on aside: the fold drops
them, and they change nothing), and simulates to the same figures. Both are checked here, on the
clusters the fold's own tests use and on a seeded family of shapes for each op, where
:func:`mkernel.builders.local_symmetric` says the build is exact.
"""
from __future__ import annotations

import dataclasses
import random

import pytest

from mkernel import Cluster, Workload, builders, runner
from mkernel.controller import Balance, sim_controller
from mkernel.errors import BackendUnavailable
from mkernel.ir import Op, Region, Role, Signal, Step, Wait, expand
from mkernel.scenario import load_scenario
from mkernel.schedule_builder import ScheduleBuilder
from mkernel.sim import SimBackend
from mkernel.sim.collapse import collapse
from mkernel.sim.localfold import NotFoldable, fold_locals

FOLDED_OPS = ("gemm_ar", "gemm_rs", "ag_gemm", "ring_attention")
SHAPES = [(2, 2, "ib_rc"), (2, 4, "ib_rc"), (4, 2, "ibgda"), (3, 2, "ib_rc"), (2, 4, "efa_srd")]


def cluster(nodes: int, gpus: int, transport: str = "ib_rc", **nic) -> Cluster:
    c = Cluster("t", nodes, gpus, transport=transport)
    return dataclasses.replace(c, nic=dataclasses.replace(c.nic, **{"srd_jitter_us": 0.0, **nic}))


def workload(kernel: str) -> Workload:
    """``kernel``'s small workload; "gemm_rs push": GEMM+RS's push variant (``Workload.node_reduce``)."""
    kernel, _, reduce = kernel.partition(" ")
    if kernel == "ring_attention":
        return Workload(kernel=kernel, m=96, n=2, k=32, tile_m=16, causal=1)
    return Workload(kernel=kernel, m=1536, n=1536, k=128, **({"node_reduce": reduce} if reduce else {}))


def members(s) -> list[tuple]:
    """Every member of ``s`` (a collapsed schedule of one rank per node) as plain values, its bumps
    kept only where a task of ``s`` waits on them (at the rank they fold onto)."""
    flat, g = expand(s), s.gpus_per_node
    waited = {(w.signal.rank, w.signal.name, w.signal.index) for t in flat.tasks for w in t.waits}
    return [(t.rank, t.role, t.op, t.reads, t.writes, t.accumulate, t.waits, t.launch, t.chunk, t.label, t.mask,
             t.index, tuple(x for x in t.signals if (x.rank % s.world - x.rank % g, x.name, x.index) in waited))
            for t in flat.tasks]


def both(w: Workload, c: Cluster, baseline: bool = False):
    """(the fold of the full build of the simulated nodes, the build of their local rank 0), collapsed;
    of the baseline's timing build with ``baseline``."""
    module, span = builders.get(w.kernel), c.fold_nodes
    build = (lambda **kw: module.build_baseline(w, c, library_tasks=False, **kw)) if baseline else \
        (lambda **kw: module.build(w, c, **kw))
    full = fold_locals(collapse(build(first_nodes=span, grouped=True), span))
    local = build(first_nodes=span, grouped=True, local_fold=True)
    local.validate()
    return full, local


@pytest.mark.parametrize("kernel", [*FOLDED_OPS, "gemm_ar push", "gemm_rs push"])
@pytest.mark.parametrize("nodes,gpus,transport", SHAPES)
def test_the_build_of_local_rank_0_is_the_fold_of_the_full_build(kernel, nodes, gpus, transport):
    c, w = cluster(nodes, gpus, transport), workload(kernel)
    kernel = w.kernel
    assert builders.local_symmetric(w, c)
    full, local = both(w, c)
    assert local.local_fold == gpus and {t.rank % gpus for t in local.tasks} == {0}
    assert members(full) == members(collapse(local, c.fold_nodes))
    s = builders.get(kernel).build(w, c, first_nodes=c.fold_nodes, grouped=True)
    a, b = SimBackend().run(s, c), SimBackend().run(local, c)
    assert a.metrics["ranks_folded"] == b.metrics["ranks_folded"] == gpus
    assert (a.time_s, a.per_rank_s, a.bytes_total, a.bytes_per_gpu) == (b.time_s, b.per_rank_s, b.bytes_total,
                                                                        b.bytes_per_gpu)
    assert a.metrics["breakdown_us"] == pytest.approx(b.metrics["breakdown_us"], rel=1e-12, abs=1e-9)
    full, local = both(w, c, baseline=True)  # the timing build's baseline: tiles alone
    assert local.local_fold == gpus and members(full) == members(collapse(local, c.fold_nodes))


def _shapes(kernel: str, rng: random.Random):
    """A seeded family of clusters and shapes of ``kernel``, ragged ones among them."""
    sc = load_scenario("paper-ib-2x8")
    while True:
        c = dataclasses.replace(sc.cluster, nodes=rng.choice([2, 3, 4]), gpus_per_node=rng.choice([2, 4, 8]))
        if kernel in ("gemm_ar", "gemm_rs"):
            tm, tn = rng.choice([(128, 256), (64, 64), (128, 128)])
            m = rng.choice([tm * k for k in (4, 8, 12, 6)] + [700, 1000, 1536])
            n = rng.choice([tn * k for k in (2, 4, 3, 5)] + [520, 300])
            w = dataclasses.replace(sc.workload, kernel=kernel, m=m, n=n, k=64, tile_m=tm, tile_n=tn,
                                    chunk_tiles=rng.choice([1, 2, 3, 4]),
                                    internode=rng.choice(["direct", "twoshot", "ring"] if kernel == "gemm_ar"
                                                         else ["direct", "ring"]),
                                    node_reduce=rng.choice(["pull", "push"]))
        elif kernel == "ag_gemm":
            w = dataclasses.replace(sc.workload, kernel=kernel, m=rng.choice([512, 768, 1536, 3000]),
                                    n=rng.choice([128, 300]), k=128, internode=rng.choice(["direct", "ring"]))
        else:
            w = dataclasses.replace(sc.workload, kernel=kernel, m=rng.choice([96, 256, 384]), n=rng.choice([1, 2, 3]),
                                    k=32, tile_m=rng.choice([16, 96]), causal=rng.choice([0, 1]),
                                    kv_tile=rng.choice([16, 32, 128]))
        try:
            builders.get(kernel).check(w, c)
        except Exception:  # a shape the op refuses on this cluster
            continue
        if builders.node_symmetric(w, c):
            yield w, c


@pytest.mark.parametrize("kernel", FOLDED_OPS)
def test_local_symmetric_says_exactly_where_local_builds_are_exact(kernel):
    """Where it says yes, the local build is the fold of the full one; where it says no (ragged
    GEMM+AR tiles that do not deal evenly), the simulator's check refuses the full build too."""
    said = {True: 0, False: 0}
    shapes = _shapes(kernel, random.Random(30))
    for _ in range(16):
        w, c = next(shapes)
        yes = builders.local_symmetric(w, c)
        said[yes] += 1
        if yes:
            full, local = both(w, c)
            assert members(full) == members(collapse(local, c.fold_nodes)), (w, c.nodes, c.gpus_per_node)
        else:
            s = builders.get(kernel).build(w, c, first_nodes=c.fold_nodes, grouped=True)
            with pytest.raises(NotFoldable):
                fold_locals(collapse(s, c.fold_nodes))
    assert said[True] >= 6, said


def test_gemm_ar_local_symmetric_is_told_from_the_shape_as_its_tiles_deal():
    """Its arithmetic rule agrees with dealing the tiles G to a slot and comparing each slot's shapes,
    on every small grid with ragged edges; and a huge grid is answered without listing its tiles (the
    runner asks before the size check refuses it)."""
    from mkernel.builders import gemm_ar
    from mkernel.builders._tiling import tile_grid

    for g in (1, 2, 3, 4, 8):
        c = cluster(2, g)
        for m, n in ((m, n) for m in range(1, 41, 3) for n in range(1, 41, 2)):
            w = Workload(kernel="gemm_ar", m=m, n=n, k=8, tile_m=4, tile_n=8)
            tiles = tile_grid(m, n, 4, 8)
            dealt = len(tiles) % g == 0 and all(
                (t.row1 - t.row0, t.col1 - t.col0) == (s.row1 - s.row0, s.col1 - s.col0)
                for t in tiles for s in (tiles[t.index - t.index % g],))
            assert gemm_ar.local_symmetric(w, c) == dealt, (g, m, n)
    huge = Workload(kernel="gemm_ar", m=10_000_001, n=10_000_000, k=8)  # 6e9 tiles
    assert not gemm_ar.local_symmetric(huge, cluster(2, 8))


def test_a_baseline_whose_rings_run_as_tasks_is_not_built_for_local_rank_0():
    c, w = cluster(2, 2), workload("gemm_ar")
    assert builders.local_baseline(w, c) and not builders.local_baseline(dataclasses.replace(w, collectives="ir"), c)


def test_moe_is_never_built_for_local_rank_0():
    c = cluster(2, 2)
    w = Workload(kernel="moe_dispatch_gemm", m=96, n=40, k=32, experts=8, topk=2, tile_m=16, tile_n=32,
                 routing="shifted")
    assert builders.node_symmetric(w, c) and not builders.local_symmetric(w, c)


@pytest.mark.parametrize("case", ["controller", "trace", "stress", "nics", "jitter"])
def test_a_run_that_may_not_fold_refuses_a_local_build(case):
    c = cluster(2, 2, count=2) if case == "nics" else cluster(2, 2, "efa_srd", srd_jitter_us=2.0) \
        if case == "jitter" else cluster(2, 2)
    local = builders.get("gemm_ar").build(workload("gemm_ar"), c, first_nodes=1, local_fold=True)
    options = {"controller": {"controller": sim_controller(Balance.for_cluster(c))}, "trace": {"trace": True},
               "stress": {"stress": 0.5}}.get(case, {})
    assert SimBackend().folds_locals(c) == (case not in ("nics", "jitter"))
    with pytest.raises(BackendUnavailable, match="built for local rank 0 alone"):
        SimBackend().run(local, c, **options)


def test_the_runner_builds_local_rank_0_alone_with_the_same_result(monkeypatch):
    sc = load_scenario("paper-ib-2x8")
    sc = dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, gpus_per_node=4),
                             workload=dataclasses.replace(sc.workload, m=2048, n=2048, k=256))
    module = builders.get("gemm_ar")
    build, asked = module.build, []

    def spy(*a, **kw):
        asked.append(kw.get("local_fold", False))
        return build(*a, **kw)

    monkeypatch.setattr(module, "build", spy)
    now, _ = runner.run(sc)
    assert asked == [True]
    monkeypatch.setattr(builders, "local_symmetric", lambda w, c: False)
    before, _ = runner.run(sc)
    assert asked == [True, False]
    for r in (now, before):
        r.pop("wall_s")
        r.pop("events")  # bumps nobody waits on: the fold drops them, the build keeps them
    assert now == before


def test_a_bump_on_another_local_rank_that_the_builder_has_not_declared_is_refused():
    sb = ScheduleBuilder("t", "fused", 4, 4, 8, first_nodes=1, local_fold=True, rotating={"s": 2}, fixed=("f",))
    sb.buffer("X", 4, 64)
    sb.launch("l", {Role.COMPUTE: 2})
    sb.add(0, Role.COMPUTE, Op.NOP, signals=(Signal(1, "s", 2), Signal(2, "f"), Signal(0, "own")))  # declared, own
    with pytest.raises(ValueError, match="declares it neither rotating nor fixed"):
        sb.add(0, Role.COMPUTE, Op.NOP, signals=(Signal(3, "other"),))
    with pytest.raises(ValueError, match="declares it neither rotating nor fixed"):  # a group's members reach peers
        sb.add(0, Role.COMPUTE, Op.NOP, signals=(Signal(0, "other"),), count=2, step=Step(signals=((1, 0),)))
    with pytest.raises(ValueError, match="neither rotating nor fixed"):  # a full baseline's collective renames
        builders.get("gemm_ar").build_baseline(workload("gemm_ar"), cluster(2, 2), first_nodes=1, local_fold=True)


def test_a_group_whose_renamed_signals_do_not_step_evenly_is_added_as_its_members():
    sb = ScheduleBuilder("t", "fused", 4, 4, 8, first_nodes=1, grouped=True, local_fold=True, rotating={"s": 2})
    sb.buffer("X", 4, 64)
    sb.launch("l", {Role.COMPUTE: 2})
    # member i bumps s[i] on rank i: indices hold a relative rank i // 2, rotated back by rank i's local
    sb.add(0, Role.COMPUTE, Op.COPY, reads=(Region("X", 0, 0, 1, 0, 8),), writes=(Region("X", 0, 1, 2, 0, 8),),
           signals=(Signal(0, "s", 0),), label="c {}", count=4,
           step=Step(((0, 0, 8), (0, 0, 8)), ((1, 1),), label=(0, 1)))
    sb.add(0, Role.COMPUTE, Op.NOP, waits=(Wait(Signal(0, "s", 0), 1),))
    s = sb.build(0.0)
    assert [t.count for t in s.tasks] == [1, 1, 1, 1, 1]
    # images: (q - q % 4 + (q % 4 - local) % 4) * 2 + rest, q = index // 2, local = rank
    assert [t.signals[0].index for t in s.tasks[:4]] == [0, 7, 6, 5]
    assert [t.label for t in s.tasks[:4]] == ["c 0", "c 1", "c 2", "c 3"] and [t.id for t in s.tasks] == [0, 1, 2, 3, 4]
