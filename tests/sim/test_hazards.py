"""Hazard detection: a corpus of seeded protocol bugs is caught, correct schedules raise nothing.

A bug counts as caught when validate() rejects the schedule, the simulator reports a deadlock, or
the run records a hazard (a consumer read bytes that had not landed, or the caller got an output
that had not landed when the kernel ended).
"""
from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from mkernel import Cluster, DeadlockError, ScheduleError, Wait, Workload
from mkernel.builders import gemm_ar, get
from mkernel.ir import expand
from mkernel.sim.faults import Faults
from mkernel.sim import SimBackend

W = Workload(m=512, n=1024, k=64, chunk_tiles=2, baseline_chunk_kib=64)


def caught(schedule, cluster) -> str | None:
    """How a bug was caught: by validate(), a deadlock, or a hazard in a plain or stressed run."""
    try:
        schedule.validate()
    except ScheduleError:
        return "validate"
    for seed, stress in [(0, 0.0)] + [(s, 3.0) for s in range(1, 9)]:
        try:
            stats = SimBackend().run(schedule, cluster, seed=seed, stress=stress)
        except DeadlockError:
            return "deadlock"
        if stats.hazards:
            return f"hazard (seed {seed}, stress {stress})"
    return None


def mutate_wait(schedule, task_id: int, how: str):
    tasks = list(schedule.tasks)
    t = tasks[task_id]
    w = t.waits[-1]
    if how == "drop":
        tasks[task_id] = dataclasses.replace(t, waits=t.waits[:-1])
    else:  # too_few
        tasks[task_id] = dataclasses.replace(t, waits=t.waits[:-1] + (Wait(w.signal, w.count - 1),))
    return dataclasses.replace(schedule, tasks=tuple(tasks))


# The waits whose removal (or an undercount) is a genuine bug: each guards a read of bytes that
# another task or rank produces. (A drain's wait is not: on some clusters every write it guards is
# local, and a rank's kernel ends only after its own tasks anyway.)
GUARDS = {"fused": ("contrib", "final", "arrived", "chunk_ready"),
          "gemm+nccl_hier_ar": (".rs", ".ag", "l1_done", "l2_done", "block_done", ".stage")}


def corpus(grouped: bool = False) -> list[tuple[str, object, Cluster]]:
    """At least 20 seeded bugs over both schedules, three clusters and every kind of guarding wait
    (in grouped builds with ``grouped``: a group's wait goes from every member)."""
    rng = random.Random(2026)
    bugs = []
    for nodes, gpus in ((2, 2), (1, 4), (2, 1)):
        c = Cluster("t", nodes, gpus)
        for schedule in (gemm_ar.build(W, c, grouped=grouped), gemm_ar.build_baseline(W, c, grouped=grouped)):
            by_kind: dict = {}
            for t in schedule.tasks:
                for guard in GUARDS[schedule.variant]:
                    if t.waits and guard in t.waits[-1].signal.name:
                        by_kind.setdefault(guard, []).append(t)
            for kind, tasks in sorted(by_kind.items()):
                victim = rng.choice(tasks[:4])  # among the first in their queues: the race is live
                for how in ("drop", "too_few") if victim.waits[-1].count > 1 else ("drop",):
                    name = f"{schedule.variant} {nodes}x{gpus}: {how} wait on {kind} in task {victim.id}"
                    bugs.append((name, mutate_wait(schedule, victim.id, how), c))
    for nodes, gpus in ((2, 2), (2, 4), (3, 2)):  # the flag posted behind the data overtakes it on SRD
        c = Cluster("t", nodes, gpus, transport="efa_srd", notify="flag")
        bugs.append((f"fused {nodes}x{gpus}: SRD flag write after data", gemm_ar.build(W, c, grouped=grouped), c))
        # the baseline's declared rings, simulated (a timing run would take NCCL's time for the launch)
        rings = dataclasses.replace(W, collectives="ir")
        bugs.append((f"baseline {nodes}x{gpus}: SRD flag write after data",
                     gemm_ar.build_baseline(rings, c, grouped=grouped), c))
    return bugs


CORPUS = corpus()


def test_corpus_is_large_enough():
    assert len(CORPUS) >= 20


@pytest.mark.parametrize("name,schedule,cluster", CORPUS, ids=[b[0] for b in CORPUS])
def test_every_seeded_bug_is_caught(name, schedule, cluster):
    assert caught(schedule, cluster) is not None, name


@pytest.mark.parametrize("transport,notify", [("ib_rc", "auto"), ("efa_srd", "auto"), ("efa_srd", "fence"),
                                              ("ibgda", "auto"), ("ib_rc", "fence")])
@pytest.mark.parametrize("nodes,gpus", [(1, 1), (1, 8), (2, 1), (2, 2), (2, 8), (3, 2), (4, 4)])
def test_no_false_positives_on_correct_schedules(nodes, gpus, transport, notify):
    c = Cluster("t", nodes, gpus, transport=transport, notify=notify)
    for schedule in (gemm_ar.build(W, c), gemm_ar.build_baseline(W, c)):
        for seed in (0, 1):
            assert SimBackend().run(schedule, c, seed=seed).hazards == ()


def test_hazard_names_rank_chunk_and_time():
    c = Cluster("t", 2, 2, transport="efa_srd", notify="flag")
    hazards = SimBackend().run(gemm_ar.build(W, c), c, seed=3).hazards
    assert hazards
    h = hazards[0]
    assert {"rank", "task", "chunk", "time_us", "region"} <= set(h) and h["chunk"] >= 0 and h["time_us"] > 0


def test_a_timing_run_without_hazard_tracking_gives_the_tracked_times():
    """``hazards=False`` (a sweep's runs): no tracking, groups run whole, the times and bytes alike;
    the run that finds a hazard above then reports none, and the sweep's rows hold none."""
    c = Cluster("t", 2, 2, transport="efa_srd", notify="flag")
    for s in (gemm_ar.build(W, c), gemm_ar.build(W, c, grouped=True)):
        tracked, quiet = SimBackend().run(s, c, seed=3), SimBackend().run(s, c, seed=3, hazards=False)
        assert tracked.hazards and quiet.hazards == ()
        assert (quiet.time_s, quiet.per_rank_s, quiet.bytes_total) == (tracked.time_s, tracked.per_rank_s,
                                                                       tracked.bytes_total)


def test_a_run_without_hazard_tracking_takes_auto_s_runs_untracked_too():
    """``auto`` decides by simulating both schedules, and the run takes those runs as its own: with
    ``hazards=False`` they are untracked too, so the row holds none (tracked, this run finds one)."""
    from mkernel import runner
    from mkernel.scenario import load_scenario

    sc = load_scenario("default")
    sc = dataclasses.replace(sc, cluster=Cluster("t", 2, 2, transport="efa_srd", notify="flag"),
                             workload=dataclasses.replace(W, schedule="auto"))
    tracked, _ = runner.run(sc, seed=3)
    quiet, _ = runner.run(sc, seed=3, hazards=False)
    assert not tracked["collapsed"] and tracked["hazards"] and quiet["hazards"] == []
    assert quiet["time_s"] == tracked["time_s"]


def grouped_bugs() -> list[tuple[str, object, Cluster, dict]]:
    """Hazard-producing runs of grouped schedules: the corpus above in grouped builds, the SRD
    flag under reordering faults, and a seeded sample of every op's weakened waits (as
    tests/sim/test_mutations.py makes them, on shapes wide enough for groups; run without data)."""
    bugs = [(name, s, c, {}) for name, s, c in corpus(grouped=True)]
    srd = Cluster("t", 2, 2, transport="efa_srd", notify="flag")
    bugs.append(("fused 2x2: SRD flag, reordered", gemm_ar.build(W, srd, grouped=True), srd,
                 {"faults": Faults(seed=9, reorder=0.5, reorder_us=30.0)}))
    rng, c = random.Random(30), Cluster("mut", 2, 2, transport="efa_srd")
    shapes = {"gemm_ar": dict(m=300, n=1040, k=24, chunk_tiles=2), "gemm_rs": dict(m=520, n=600, k=24, chunk_tiles=2),
              "ag_gemm": dict(m=600, n=1024, k=40), "ring_attention": dict(m=40, n=3, k=32, tile_m=16),
              "moe_dispatch_gemm": dict(m=192, n=160, k=32, experts=16, topk=3, tile_m=16, tile_n=32, routing="zipf")}
    for kernel, shape in shapes.items():
        w = Workload(kernel=kernel, collectives="ir", baseline_chunk_kib=8, **shape)
        for s in (get(kernel).build(w, c, grouped=True), get(kernel).build_baseline(w, c, grouped=True)):
            waiting = [t for t in s.tasks if t.waits]
            groups = [t for t in waiting if t.count > 1]
            for t in rng.sample(waiting, 4) + rng.sample(groups, min(2, len(groups))):
                how = rng.choice(("drop", "too_few") if t.waits[-1].count > 1 else ("drop",))
                bugs.append((f"{kernel}/{s.variant}: {how} wait in task {t.id}", mutate_wait(s, t.id, how), c, {}))
    return bugs


GROUPED = grouped_bugs()


def _figures(stats) -> tuple:
    return stats.time_s, stats.per_rank_s, stats.bytes_total, stats.metrics["breakdown_us"], stats.events


@pytest.mark.parametrize("name,schedule,cluster,kw", GROUPED, ids=[b[0] for b in GROUPED])
def test_hazards_tracked_on_groups_are_the_flat_runs(name, schedule, cluster, kw):
    """A tracked run takes groups whole (a run of members checks their reads at its start and lands
    their writes at its end): it reports the hazards that the run of the expanded schedule (the
    oracle) reports, member by member, in the same order, with the same times; and a run that tracks
    nothing gives the tracked run's figures."""
    try:
        flat = SimBackend().run(expand(schedule), cluster, seed=3, **kw)
    except DeadlockError as e:
        with pytest.raises(DeadlockError) as got:
            SimBackend().run(schedule, cluster, seed=3, **kw)
        assert str(got.value).split(":")[0] == str(e).split(":")[0]
        return
    grouped = SimBackend().run(schedule, cluster, seed=3, **kw)
    quiet = SimBackend().run(schedule, cluster, seed=3, hazards=False, **kw)
    assert grouped.hazards == flat.hazards
    assert (grouped.time_s, grouped.per_rank_s, grouped.bytes_total, grouped.metrics["breakdown_us"]) == \
        (flat.time_s, flat.per_rank_s, flat.bytes_total, flat.metrics["breakdown_us"])
    assert _figures(quiet)[:4] == _figures(grouped)[:4] and quiet.hazards == ()


def test_the_grouped_bugs_show_hazards_of_members_past_a_groups_first():
    """The comparison above is not vacuous: more than half of its runs report hazards (47 of 79
    when written), and 20 of them name a member other than its group's first (numbered as the
    expanded schedule numbers it)."""
    shown = members = 0
    for _, schedule, cluster, kw in GROUPED:
        hazards = SimBackend().run(schedule, cluster, seed=3, **kw).hazards
        first = {int(u) for u in np.cumsum([0] + [t.count for t in schedule.tasks])}
        shown += bool(hazards)
        members += any(h["task"] >= 0 and h["task"] not in first for h in hazards)
    assert shown > len(GROUPED) // 2 and members >= 10


def test_groups_updating_in_place_and_adding_into_one_region_are_tracked_as_their_members():
    """Members that each update their own row in place (reading it: a task does not wait on its own
    write) raise nothing. Members of one group that add into one output region land two at once,
    then the third; a reader released after two of three reads bytes not all landed, and the output
    has all three when the kernel ends. The grouped run names the reader, the region and the member
    still pending, as the run of the expansion does."""
    from mkernel.ir import BufferKind, Op, Region, Role, Signal, Step
    from mkernel.schedule_builder import ScheduleBuilder

    sb = ScheduleBuilder("t", "fused", 1, 1, 8, grouped=True)
    sb.buffer("X", 4, 64, kind=BufferKind.INPUT)
    sb.buffer("P", 3, 64)
    sb.buffer("Q", 1, 64, kind=BufferKind.OUTPUT, writes_per_element=3)
    sb.buffer("O", 1, 64)
    sb.launch("l", {Role.INTRA: 1, Role.SEND: 2, Role.COMPUTE: 1})
    row = Region("P", 0, 0, 1, 0, 64)
    sb.add(0, Role.INTRA, Op.REDUCE, reads=(row, Region("X", 0, 0, 1, 0, 64)), writes=(row,), accumulate=True,
           label="scale {}", count=3, step=Step(((0, 1, 0), (0, 1, 0), (0, 1, 0)), label=(0, 1)))
    sb.add(0, Role.SEND, Op.REDUCE, reads=(Region("X", 0, 0, 1, 0, 64),), writes=(Region("Q", 0, 0, 1, 0, 64),),
           accumulate=True, signals=(Signal(0, "s"),), label="add {}", count=3,
           step=Step(((0, 1, 0), (0, 0, 0)), label=(0, 1)))
    sb.add(0, Role.COMPUTE, Op.COPY, reads=(Region("Q", 0, 0, 1, 0, 64),), writes=(Region("O", 0, 0, 1, 0, 64),),
           waits=(Wait(Signal(0, "s"), 2),), label="out")
    s = sb.build(0.0)
    c = Cluster("t", 1, 1)
    grouped, flat = SimBackend().run(s, c), SimBackend().run(expand(s), c)
    assert grouped.hazards == flat.hazards
    assert [(h["label"], h["region"], h["pending_writers"]) for h in grouped.hazards] == [("out", "Q@0[0:1,0:64]", [5])]
