"""Grouped tasks (issue 30): a group stands for exactly the tasks it replaced.

For every op and variant on small clusters (tests/harness/golden_schedules.py), the flat build and the
expanded grouped build both hash to the schedules main built before groups existed, task for task;
the hw tables of a grouped schedule equal those of the flat one; and validate judges a grouped
schedule as it judges its expansion.
"""
from __future__ import annotations

import dataclasses
import json

import pytest

from harness import golden_schedules as golden
from mkernel.errors import ScheduleError
from mkernel.ir import Op, Region, Role, Schedule, Signal, Step, Wait, expand
from mkernel.schedule_builder import ScheduleBuilder

TABLE = json.loads(golden.FILE.read_text())
CASES = list(golden.cases())


@pytest.mark.parametrize("name,w,c,first", CASES, ids=[case[0] for case in CASES])
def test_flat_and_expanded_grouped_builds_equal_the_golden_schedules(name, w, c, first):
    flat = golden.build_pair(w, c, first)
    grouped = golden.build_pair_grouped(w, c, first)
    for f, g in zip(flat, grouped):
        want = TABLE[f"{name}/{f.variant}"]
        assert (len(f.tasks), golden.digest(f)) == (want["tasks"], want["sha256"]), f"flat {f.variant}"
        e = expand(g)
        assert (len(e.tasks), golden.digest(e)) == (want["tasks"], want["sha256"]), f"grouped {g.variant}"
        assert e.tasks == f.tasks
        g.validate()


WIDER = {"ag_gemm": 1024, "moe_dispatch_gemm": 160}  # columns enough for groups (the goldens' shapes make none)
LOWERED = [(name, dataclasses.replace(w, n=WIDER.get(w.kernel, w.n)), c, first) for name, w, c, first in CASES
           if "/2x4/" in name and not name.endswith("/first_nodes")]
LOWERED += [(f"{kernel}/2x4/node_reduce=push", dataclasses.replace(LOWERED[0][1], kernel=kernel, **golden.SHAPES[kernel],
                                                                   node_reduce="push"), LOWERED[0][2], 0)
            for kernel in ("gemm_ar", "gemm_rs")]  # the push variants: not among the goldens


@pytest.mark.parametrize("name,w,c,first", LOWERED, ids=[case[0] for case in LOWERED])
def test_hw_tables_of_a_grouped_schedule_equal_the_flat_ones(name, w, c, first):
    """Every op and variant: the hw lowering expands groups, so its tables are the flat build's."""
    flat, grouped = golden.build_pair(w, c, 0)[0], golden.build_pair_grouped(w, c, 0)[0]
    assert len(grouped.tasks) < len(flat.tasks)  # there are groups to expand
    golden.assert_lowered_alike(flat, grouped)


def test_validate_checks_every_member_of_a_group():
    sb = _builder()
    sb.add(0, Role.COMPUTE, Op.COPY, reads=(Region("X", 0, 0, 1, 0, 8),), writes=(Region("X", 0, 1, 2, 0, 8),),
           label="c {}", count=9, step=Step(((0, 0, 8), (0, 0, 8)), label=(0, 1)))  # member 8 leaves X's 64 columns
    with pytest.raises(ScheduleError, match="outside buffer X"):
        sb.build(0.0).validate()
    sb = _builder()
    sb.add(0, Role.INTRA, Op.COPY, reads=(Region("X", 0, 0, 1, 0, 8),), writes=(Region("X", 0, 1, 2, 0, 8),),
           signals=(Signal(0, "s"),), label="c {}", count=3, step=Step(signals=((1, 0),), label=(0, 1)))
    with pytest.raises(ScheduleError, match="rank outside|across nodes|outside 0"):
        sb.build(0.0).validate()  # member 2 signals rank 2 of a 2-rank world


@pytest.mark.parametrize("kernel,shape", [("gemm_ar", dict(m=4096, n=4096, k=64)),
                                          ("gemm_rs", dict(m=4096, n=4096, k=64)),
                                          ("ag_gemm", dict(m=4096, n=4096, k=64)),
                                          ("ring_attention", dict(m=2048, n=2, k=128, tile_m=128))])
def test_grouping_shrinks_the_schedules(kernel, shape):
    """The point of groups: both schedules of each tiled op are far fewer tasks than members."""
    _, w, c, first = next(case for case in CASES if case[0].startswith(f"{kernel}/2x4"))
    w = dataclasses.replace(w, **shape)
    for f, g in zip(golden.build_pair(w, c, 1), golden.build_pair_grouped(w, c, 1)):
        assert len(expand(g).tasks) == len(f.tasks)
        assert len(g.tasks) < 0.6 * len(f.tasks), (g.variant, len(g.tasks), len(f.tasks))


def _builder() -> ScheduleBuilder:
    sb = ScheduleBuilder("t", "fused", 2, 2, 8, grouped=True)
    sb.buffer("X", 4, 64)
    sb.launch("l", {Role.COMPUTE: 2, Role.INTRA: 2})
    return sb


def test_members_step_every_number_and_keep_the_rest():
    sb = _builder()
    g = sb.add(0, Role.INTRA, Op.COPY, reads=(Region("X", 0, 0, 1, 0, 8),), writes=(Region("X", 1, 1, 2, 0, 8),),
               waits=(Wait(Signal(0, "w", 3), 2),), signals=(Signal(1, "s", 10), Signal(0, "t")), chunk=-1,
               label="copy {} now", count=3, step=Step(((0, 0, 8), (0, 1, 16)), ((0, 2), (0, 0)), (1,), 0, (5, 7)))
    m = g.members()
    assert [t.id for t in m] == [0, 1, 2] and [t.label for t in m] == ["copy 5 now", "copy 12 now", "copy 19 now"]
    assert m[2].reads == (Region("X", 0, 0, 1, 16, 24),) and m[2].writes == (Region("X", 1, 3, 4, 32, 40),)
    assert m[2].waits == (Wait(Signal(0, "w", 5), 2),) and m[2].signals == (Signal(1, "s", 14), Signal(0, "t"))
    assert sb.bumped(Signal(0, "t")) == 3 and sb.bumped(Signal(1, "s", 12)) == 1
    assert sb.add(0, Role.COMPUTE, Op.NOP, label="one {}", count=1, step=Step(label=(4, 1))).label == "one 4"
    s = sb.build(0.0)
    assert [t.id for t in expand(s).tasks] == [0, 1, 2, 3]


SIM_CASES = [case for case in CASES if "/2x4/" in case[0] or "/3x2/" in case[0] or "/leaf" in case[0]]


@pytest.mark.parametrize("name,w,c,first", SIM_CASES, ids=[case[0] for case in SIM_CASES])
def test_grouped_runs_simulate_the_flat_times(name, w, c, first):
    """Runs of members give the times the members give one by one: collapsed (no hazard tracking)
    and, for full builds, tracked too (on the groups: tests/sim/test_hazards.py compares the hazards)."""
    from mkernel.sim import SimBackend

    for f, g in zip(golden.build_pair(w, c, first), golden.build_pair_grouped(w, c, first)):
        for collapse in (True, False) if not first else (True,):
            a, b = SimBackend().run(f, c, collapse=collapse), SimBackend().run(g, c, collapse=collapse)
            assert b.time_s == pytest.approx(a.time_s, rel=1e-12, abs=0), (f.variant, collapse)
            assert b.per_rank_s == pytest.approx(a.per_rank_s, rel=1e-12), (f.variant, collapse)
            assert b.bytes_total == pytest.approx(a.bytes_total, rel=1e-12) and b.hazards == a.hazards
            assert b.metrics["breakdown_us"] == pytest.approx(a.metrics["breakdown_us"], rel=1e-9, abs=1e-9)


def _quiet_and_tracked(s: Schedule):
    """The finish times of a quiet run (no data, no hazard tracking, as when collapsed) and of a
    tracked run of the expansion."""
    from mkernel import Cluster
    from mkernel.sim.engine import Model

    c = Cluster("t", 1, s.world)
    quiet, tracked = Model(s, c, None, track_hazards=False), Model(expand(s), c, None, track_hazards=True)
    quiet.run()
    tracked.run()
    return quiet.finish, tracked.finish


def test_a_library_timed_launch_bumps_every_members_signals():
    """A launch timed as a library call (sim/library.py) ends all its tasks at once: a group of 3
    bumps its fixed signal 3 times and each member's stepped one, as its 3 members would."""
    from mkernel.ir import Library

    sb = ScheduleBuilder("t", "baseline", 2, 2, 8, grouped=True)
    sb.launch("call", {Role.INTRA: 2}, Library("gemm", shape=(256, 256, 64)))
    sb.add(0, Role.INTRA, Op.NOP, signals=(Signal(0, "all"), Signal(1, "each", 0)), label="m {}", count=3,
           step=Step(signals=((0, 0), (0, 1)), label=(0, 1)))
    sb.launch("after", {Role.COMPUTE: 1})
    sb.add(0, Role.COMPUTE, Op.NOP, waits=(Wait(Signal(0, "all"), 3),))
    sb.add(1, Role.COMPUTE, Op.NOP, waits=(Wait(Signal(1, "each", 2), 1),))  # member 2's own signal
    quiet, tracked = _quiet_and_tracked(sb.build(0.0))
    assert quiet == tracked and quiet[0] > 0


@pytest.mark.parametrize("grouped", [True, False])
def test_counted_sms_keep_their_roles_target(grouped):
    """SMs of a role without tasks move to one under its target (sim/sms.py), so a role's own SMs
    may then find it full: counted (bulk) SMs must retire there as named ones do. With 4 intra SMs
    idle and 4 compute SMs, 8 tiles run on 4 SMs: two waves, with or without a trace."""
    from mkernel import Cluster
    from mkernel.sim import SimBackend

    sb = ScheduleBuilder("t", "fused", 1, 1, 8, grouped=grouped)
    for name in ("A", "B", "C"):
        sb.buffer(name, 1024, 1024)
    sb.launch("l", {Role.INTRA: 4, Role.COMPUTE: 4})
    sb.add(0, Role.COMPUTE, Op.GEMM, reads=(Region("A", 0, 0, 128, 0, 1024), Region("B", 0, 0, 1024, 0, 128)),
           writes=(Region("C", 0, 0, 128, 0, 128),), label="tile {}", count=8,
           step=Step(((0, 0, 0), (0, 0, 128), (0, 0, 128)), label=(0, 1)))
    s, c = sb.build(0.0), Cluster("t", 1, 1)
    named, counted = SimBackend().run(s, c, trace=True), SimBackend().run(s, c)
    assert counted.time_s == pytest.approx(named.time_s, rel=1e-12, abs=0)
    assert len({span[2] for span in named.spans}) == 4  # four SMs ran the tiles


@pytest.mark.parametrize("grouped", [True, False])
def test_every_op_on_the_compute_role_counts_as_computing(grouped):
    """SMs count themselves out of the computing SMs when a member of any op on the compute role
    ends, so they count themselves in when it starts, also where counted SMs start a run of members
    (the first wave, or members released from a wait): the count, which sets a GEMM's speed class,
    ends at 0, and the compute-busy time is the copies' (MoE's gathers and every drain on the compute
    role once left it at -1, and the breakdown's compute time above the run's)."""
    from mkernel import Cluster
    from mkernel.sim.engine import Model

    sb = ScheduleBuilder("t", "fused", 1, 1, 8, grouped=grouped)
    sb.buffer("X", 4, 1 << 16)
    sb.launch("l", {Role.COMPUTE: 4})
    sb.add(0, Role.COMPUTE, Op.COPY, reads=(Region("X", 0, 0, 1, 0, 1 << 14),), writes=(Region("X", 0, 2, 3, 0, 1 << 14),),
           label="copy {}", count=2, step=Step(((0, 0, 1 << 14), (0, 0, 1 << 14)), label=(0, 1)))
    sb.add(0, Role.COMPUTE, Op.NOP, label="drain")
    m = Model(sb.build(0.0), Cluster("t", 1, 1), None, track_hazards=False)
    m.run()
    assert m._computing == [0]
    assert 0 < m.compute_busy[0] <= m.finish[0]


FULL_SIM_CASES = [case for case in SIM_CASES if not case[3]]


@pytest.mark.parametrize("name,w,c,first", FULL_SIM_CASES, ids=[case[0] for case in FULL_SIM_CASES])
def test_quiet_runs_spanning_entries_give_the_tracked_times(name, w, c, first):
    """A quiet run lets ready GEMM tiles of one cost from neighbouring entries share a run
    (dispatch.Run.parts), its NVLink tasks wake once, and it plays plain launches (sim/tiles.py); a
    tracked run of the expansion takes its tasks one by one. Both must give every rank the same
    finish, to the last bit."""
    from mkernel.sim.engine import Model

    for s in golden.build_pair_grouped(w, c, 0):
        quiet, tracked = Model(s, c, None, track_hazards=False), Model(expand(s), c, None, track_hazards=True)
        quiet.run()
        tracked.run()
        assert quiet.finish == tracked.finish, s.variant
        assert quiet.compute_busy == tracked.compute_busy, s.variant


def test_cycling_signals_step_within_and_between_cycles():
    """``Step.period``: member i's signals step (i mod p) times the inner step plus (i div p) times the
    outer one; the bumps a group makes (counted anywhere, folded or not) are its members'."""
    from collections import Counter

    from mkernel.signal_table import bump_keys, count_homes

    sb = _builder()
    t = sb.add(0, Role.COMPUTE, Op.COPY, reads=(Region("X", 0, 0, 1, 0, 8),), writes=(Region("X", 0, 1, 2, 0, 8),),
               signals=(Signal(0, "s", 2), Signal(1, "t")), label="c {}", count=7,
               step=Step(((0, 0, 8), (0, 0, 8)), ((1, 1), (0, 0)), label=(0, 1), period=2, outer=((0, 10), (0, 0))))
    members = t.members()
    assert [m.signals[0] for m in members] == [Signal(r, "s", x) for r, x in
                                                ((0, 2), (1, 3), (0, 12), (1, 13), (0, 22), (1, 23), (0, 32))]
    assert all(m.signals[1] == Signal(1, "t") for m in members)
    for home in (None, count_homes(2, 2, 1, 2)):
        fixed, moving = bump_keys(t, home=home)
        want = Counter()
        for m in members:
            f, mv = bump_keys(m, home=home)
            want.update(dict(f)), want.update(mv)
        got = Counter(moving)
        for key, times in fixed:
            got[key] += times
        assert got == want
    def bumps(keys) -> Counter:  # (the simulator bumps a group's fixed signals first: the order differs)
        out = Counter()
        for key, times in keys:
            out[key] += times
        return out

    def keys(task, first=0, n=None) -> list:
        fixed, moving = bump_keys(task, first, n)
        return fixed + [(key, 1) for key in moving]

    assert bumps(keys(t, 3, 3)) == bumps([kt for m in members[3:6] for kt in keys(m)])
    sb.build(0.0).validate()


def test_a_group_bumps_its_signals_in_the_order_its_members_would():
    """The simulator bumps a run's signals member by member, each member's in order (a group's
    fixed signal bumped n times first would wake its waiters before those of the members' stepping
    signals: a flat run wakes them in turn); a bump of k times is k bumps in a row."""
    from mkernel.sim.signals import flat_keys, signal_of

    sb = _builder()
    common = dict(reads=(Region("X", 0, 0, 1, 0, 8),), writes=(Region("X", 0, 1, 2, 0, 8),), label="c {}")
    moves = ((0, 0, 8), (0, 0, 8))
    groups = [  # a stepping and a fixed signal; two fixed; one fixed; a cycling one and a fixed one
        sb.add(0, Role.INTRA, Op.COPY, signals=(Signal(0, "s"), Signal(1, "t")), count=5,
               step=Step(moves, ((0, 1), (0, 0)), label=(0, 1)), **common),
        sb.add(0, Role.INTRA, Op.COPY, signals=(Signal(0, "u"), Signal(1, "v")), count=4,
               step=Step(moves, ((0, 0), (0, 0)), label=(0, 1)), **common),
        sb.add(0, Role.INTRA, Op.COPY, signals=(Signal(0, "w"),), count=3, step=Step(moves, label=(0, 1)), **common),
        sb.add(0, Role.INTRA, Op.COPY, signals=(Signal(0, "x", 1), Signal(0, "y")), count=6,
               step=Step(moves, ((1, 1), (0, 0)), label=(0, 1), period=2, outer=((0, 10), (0, 0))), **common),
        # one signal whose step is zero (one key bumped n times), and one cycling with a zero inner step
        sb.add(0, Role.INTRA, Op.COPY, signals=(Signal(0, "z"),), count=4, step=Step(moves, ((0, 0),), label=(0, 1)),
               **common),
        sb.add(0, Role.INTRA, Op.COPY, signals=(Signal(0, "o"),), count=6,
               step=Step(moves, ((0, 0),), label=(0, 1), period=2, outer=((0, 10),)), **common),
    ]
    for t in groups:
        members = t.members()
        for first, n in ((0, t.count), (1, 2), (2, 1)):
            want = [(g.rank, g.name, g.index) for m in members[first:first + n] for g in m.signals]
            keys, times, repeat = flat_keys(t, first, n)
            got = [signal_of(key) for key in keys * repeat for _ in range(times)]
            assert [(g.rank, g.name, g.index) for g in got] == want, (t.label, first, n)


def test_a_repeated_bump_releases_its_waiters_in_the_flat_order():
    """A group's fixed signals are bumped as one list repeated (signals.flat_keys): added at once
    where no key of it has waiters, else member by member, so waiters wake as the flat run's would."""
    from mkernel.sim.signals import SignalBoard, key_of, signal_of

    released: list[str] = []
    board = SignalBoard(1, released.append)
    a, b = key_of(0, "a", 0), key_of(0, "b", 0)
    board.bump_keys([a, b], 1, 3)  # nobody waits: +3 each
    assert [board.count(signal_of(key)) for key in (a, b)] == [3, 3]
    for key, need, name in ((b, 4, "b4"), (a, 5, "a5"), (b, 5, "b5")):
        assert board.wait_key(key, need, name)
    board.bump_keys([a, b], 1, 2)  # a b a b: b reaches 4, then a 5, then b 5
    assert released == ["b4", "a5", "b5"] and [board.count(signal_of(key)) for key in (a, b)] == [5, 5]


def test_validate_checks_the_corners_of_a_cycling_group():
    """A cycling rank is extreme at the end of a cycle, not only at the last member."""
    sb = ScheduleBuilder("t", "fused", 8, 4, 8, grouped=True)
    sb.buffer("X", 4, 64)
    sb.launch("l", {Role.INTRA: 2})
    sb.add(0, Role.INTRA, Op.COPY, reads=(Region("X", 0, 0, 1, 0, 8),), writes=(Region("X", 0, 1, 2, 0, 8),),
           signals=(Signal(0, "s"),), label="c {}", count=6,
           step=Step(((0, 0, 8), (0, 0, 8)), ((1, 0),), label=(0, 1), period=5, outer=((0, 0),)))
    with pytest.raises(ScheduleError, match="across nodes"):  # member 4 signals rank 4, member 5 rank 0
        sb.build(0.0).validate()
