"""Rotation inside a period (``Step.rotate`` with ``Step.period``): a rank that takes each slot's tiles
from its own on (l .. G - 1, then 0 .. l - 1), slot after slot along a tile row, is one group whose
owners cycle and whose members wrap within each cycle (issue 30's every-node row: GEMM entries
65,536 -> 4,096).

The oracle is the member written out by hand (tile 4a + (l + b) mod 4 for member 4a + b of local
rank l of 4), then every other reader of members against ``Task.member``: the builder's and the
simulator's signal keys, the signal table's counts (validate), the region rows of validate's
coverage and the hazard grids, and validate's corner members.
"""
from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest

from mkernel import ScheduleError
from mkernel.builders._tiling import cycled_order_runs
from mkernel.ir import Op, Region, Role, Schedule, Signal, Step, Task, expand
from mkernel.members import member_rows, read_regions
from mkernel.schedule_builder import ScheduleBuilder
from mkernel.signal_table import bump_keys, count_homes, signal_table
from mkernel.sim.gridrows import Rows
from mkernel.sim.signals import flat_keys, signal_of

COLS, G, CYCLES = 16, 4, 3


def _row(local: int, cycles: int = CYCLES) -> Task:
    """Local rank ``local`` of 4 (on rank 4 + local, node 1) along a row of ``cycles`` slots: its
    tiles' owners (tile mod 4, on node 1) and their indices (the tile's) step by one within a slot
    and by 4 from one slot to the next."""
    return Task(0, G + local, Role.COMPUTE, Op.GEMM,
                reads=(Region("A", G + local, 0, 32, 0, 8),
                       Region("B", G + local, 0, 8, local * COLS, (local + 1) * COLS)),
                writes=(Region("P", G + local, 0, 32, local * COLS, (local + 1) * COLS),),
                signals=(Signal(G + local, "contrib", local), Signal(G + local, "out")), label="tile {}",
                count=G * cycles, step=Step(((0, 0, 0), (0, 0, COLS), (0, 0, COLS)), ((1, 1), (0, 0)),
                                            label=(local, 1), period=G, outer=((0, G), (0, 0)), rotate=local))


def _tiles(local: int, cycles: int = CYCLES) -> list[int]:
    """The tiles the members stand for, by hand: each slot from the own tile on."""
    return [a * G + (local + b) % G for a in range(cycles) for b in range(G)]


@pytest.mark.parametrize("local", [1, 2, 3])
def test_members_wrap_within_each_cycle(local):
    t, tiles = _row(local), _tiles(local)
    ms = t.members()
    assert [m.writes[0].col0 // COLS for m in ms] == tiles == [m.reads[1].col0 // COLS for m in ms]
    assert [(m.signals[0].rank, m.signals[0].index) for m in ms] == [(G + x % G, x) for x in tiles]
    assert all(m.signals[1] == Signal(G + local, "out") and m.reads[0] == t.reads[0] for m in ms)
    assert [m.label for m in ms] == [f"tile {x}" for x in tiles] and [m.id for m in ms] == list(range(len(tiles)))
    assert [t.offset(i) for i in range(len(tiles))] == [x - local for x in tiles]


@pytest.mark.parametrize("local", [1, 3])
def test_signal_keys_are_the_members_own(local):
    t = _row(local)
    own = [(g.rank, g.name, g.index) for m in t.members() for g in m.signals]
    for home in (None, count_homes(2 * G, G, 1, 0), count_homes(2 * G, G, 0, G)):
        fixed, moving = bump_keys(t, home=home)
        want = Counter((home[r] if home else r, name, x) for r, name, x in own)
        assert Counter(dict(fixed)) + Counter(moving) == want
    for first, n in ((0, t.count), (1, 5), (G - local, 2), (G + 1, G), (t.count - 1, 1)):
        keys, times, repeat = flat_keys(t, first, n)
        assert [k for k in _tuples(keys) * repeat for _ in range(times)] == own[2 * first:2 * (first + n)]
        fixed, moving = bump_keys(t, first, n)
        assert Counter(dict(fixed)) + Counter(moving) == Counter(own[2 * first:2 * (first + n)])


def _tuples(keys: list[int]) -> list[tuple]:
    """The simulator's signal keys as (rank, name, index)."""
    return [(g.rank, g.name, g.index) for g in map(signal_of, keys)]


def _schedule(*tasks: Task) -> Schedule:
    sb = ScheduleBuilder("t", "fused", 2 * G, G, 8, grouped=True)
    for name, rows, cols in (("A", 32, 8), ("B", 8, COLS * G * CYCLES), ("P", 32, COLS * G * CYCLES)):
        sb.buffer(name, rows, cols)
    sb.launch("l", {Role.COMPUTE: 4})
    for t in tasks:
        sb.add(t.rank, t.role, t.op, reads=t.reads, writes=t.writes, signals=t.signals, label=t.label,
               count=t.count, step=t.step)
    return sb.build(0.0)


def test_the_signal_table_and_the_region_rows_are_the_members_own():
    s = _schedule(*(_row(local) for local in range(G)))
    flat = expand(s)
    a, b = signal_table(s), signal_table(flat)  # (keys numbered by (name, rank, index): alike where the keys are)
    assert a.keys == b.keys and (a.bumps() == b.bumps()).all()
    recs, f, codes = read_regions(s)
    counts = np.array([t.count for t in s.tasks])
    per = np.bincount(f["entry"], minlength=len(s.tasks))
    _, _, rows = member_rows(recs, per, counts)
    names = {c: name for name, c in codes.items()}
    got = list(zip(map(names.get, rows["buffer"].tolist()), *(rows[k].tolist() for k in
                                                            ("rank", "row0", "row1", "col0", "col1"))))
    want = [(r.buffer, r.rank, r.row0, r.row1, r.col0, r.col1) for t in flat.tasks for r in t.reads + t.writes]
    assert got == want
    grid = Rows(recs.astype(np.int64), per, counts)  # the hazard grids' rows: offsets of the rows that move
    cols = grid.recs[grid.rec[grid.moving], 4] + grid.recs[grid.rec[grid.moving], 8] * grid.offset
    assert cols.tolist() == [col0 for (_, _, _, _, col0, _), moves in zip(got, recs[:, 8][grid.rec] != 0) if moves]
    s.validate()


def test_validate_names_the_member_a_wrap_takes_past_the_buffer():
    """Local rank 1's row wrapped by 2: member 2 (one step back from member 0) starts left of the
    buffer; every member after it in the first cycle and the last cycle's members are inside."""
    t = _row(1)
    bad = dataclasses.replace(t, step=dataclasses.replace(t.step, rotate=2))
    assert bad.member(2).writes[0].col0 < 0 <= min(bad.member(i).writes[0].col0 for i in range(3, t.count))
    with pytest.raises(ScheduleError) as e:
        _schedule(bad).validate(races=False)
    assert str(e.value).startswith(bad.member(2).describe())


def test_validate_checks_the_wrapped_corners_of_the_last_cycle():
    """Local rank 2's row of two slots, its signal's rank stepping back by one a cycle: the ranks
    are 6 7 4 5 in the first cycle (node 1) and 5 6 3 4 in the last, where only member 6 (the last
    cycle's first past the wrap, one no plain cycling group has at a corner) signals node 0."""
    t = _row(2, cycles=2)
    bad = dataclasses.replace(t, step=dataclasses.replace(t.step, outer=((-1, G), (0, 0))))
    assert [bad.member(i).signals[0].rank for i in range(t.count)] == [6, 7, 4, 5, 5, 6, 3, 4]
    _schedule(t).validate(races=False)
    with pytest.raises(ScheduleError) as e:
        _schedule(bad).validate(races=False)
    assert str(e.value).startswith(bad.member(6).describe()) and "node" in str(e.value)


@pytest.mark.parametrize("step,why", [(dict(rotate=G), "0 < rotate < 4"), (dict(period=5), "cycles are whole")])
def test_validate_refuses_a_wrap_outside_its_cycle(step, why):
    t = _row(1)
    with pytest.raises(ScheduleError, match=why):
        _schedule(dataclasses.replace(t, step=dataclasses.replace(t.step, **step))).validate(races=False)


def test_cycles_join_only_where_rotate_row_width_and_signal_index_follow_on():
    """``cycled_order_runs`` on a 2 x 8 grid of unit tiles, owner cycles of 4: local rank 1's slots
    join into one run a row; a slot whose signal indices jump, or taken from another tile, stands
    alone; the last column narrower cuts its slot out of the row."""
    def cut(order, rel=np.arange(16), n=8):
        return cycled_order_runs(2, n, 1, 1 if n == 8 else 2, np.array(order), G, np.asarray(rel))

    local1 = [1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12]
    assert cut(local1) == [(1, 8, 1, 2), (9, 8, 1, 2)]
    assert cut(local1, np.arange(16) + 100 * (np.arange(16) // 4 == 1)) == [(1, 4, 1, 1), (5, 4, 1, 1), (9, 8, 1, 2)]
    assert cut([1, 2, 3, 0, 6, 7, 4, 5]) == [(1, 4, 1, 1), (6, 4, 2, 1)]
    assert cut(list(range(16))) == [(0, 8, 0, 2), (8, 8, 0, 2)]
    assert cut(list(range(8)), n=15) == [(0, 4, 0, 1), (4, 3, 0, 0), (7, 1, 0, 0)]  # (tile 7: 1 column wide)


@pytest.mark.parametrize("on_rank_0", [False, True])
def test_a_local_build_renames_a_wrapped_row_member_by_member(on_rank_0):
    """A build of local rank 0 alone renames each signal on another local rank (``rotating``): a group
    whose members wrap within cycles is added as its members, each renamed as a plain task would be
    (also where every signal stays on rank 0, so renaming keeps its indices stepping evenly: a group
    rebuilt from them would lose its wrap)."""
    def build(tasks) -> Schedule:
        sb = ScheduleBuilder("t", "fused", 2 * G, G, 8, first_nodes=2, grouped=True, local_fold=True,
                             rotating={"contrib": 1}, fixed=("out",))
        for name, rows, cols in (("A", 32, 8), ("B", 8, COLS * G * CYCLES), ("P", 32, COLS * G * CYCLES)):
            sb.buffer(name, rows, cols)
        sb.launch("l", {Role.COMPUTE: 4})
        for t in tasks:
            sb.add(0, t.role, t.op, reads=t.reads, writes=t.writes, signals=t.signals, label=t.label,
                   count=t.count, step=t.step)
        return sb.build(0.0)

    t = dataclasses.replace(_row(1), rank=0)  # (its regions on rank 5: this checks names, not locality)
    if on_rank_0:
        t = dataclasses.replace(t, signals=(Signal(0, "contrib", 1), t.signals[1]),
                                step=dataclasses.replace(t.step, signals=((0, 1), (0, 0))))
    grouped, members = build([t]), build(t.members())
    assert grouped.tasks == members.tasks and len(grouped.tasks) == t.count
    assert on_rank_0 or [m.signals[0] for m in members.tasks] != [m.signals[0] for m in t.members()]  # (renamed)


def test_validate_checks_the_first_cycles_last_member_before_the_wrap():
    """Local rank 2's row wrapped by 1, its signal's rank stepping back by one a cycle: ranks 6 7 8 5
    in the first cycle, 5 6 7 4 in the last; only member 2 (the first cycle's last before its wrap)
    signals past the world's 8 ranks."""
    t = _row(2, cycles=2)
    bad = dataclasses.replace(t, step=dataclasses.replace(t.step, rotate=1, outer=((-1, G), (0, 0))))
    assert [bad.member(i).signals[0].rank for i in range(t.count)] == [6, 7, 8, 5, 5, 6, 7, 4]
    with pytest.raises(ScheduleError) as e:
        _schedule(bad).validate(races=False)
    assert str(e.value).startswith(bad.member(2).describe())


def test_validate_checks_the_last_cycles_last_member_before_the_wrap_when_only_regions_move():
    """Local rank 1's row shifted one tile right, its signals stepping in index only (so validate
    checks the extreme members' regions alone): member 10, the last cycle's last before its wrap,
    is the only one whose tile lies past the buffer's right edge."""
    t = _row(1)
    shift = lambda r: dataclasses.replace(r, col0=r.col0 + COLS, col1=r.col1 + COLS)  # noqa: E731
    bad = dataclasses.replace(t, reads=(t.reads[0], shift(t.reads[1])), writes=(shift(t.writes[0]),),
                              signals=(Signal(G + 1, "contrib", 1), Signal(G + 1, "out")),
                              step=dataclasses.replace(t.step, signals=((0, 1), (0, 0))))
    width = COLS * G * CYCLES
    assert [i for i in range(t.count) if bad.member(i).writes[0].col1 > width] == [10]
    with pytest.raises(ScheduleError) as e:
        _schedule(bad).validate(races=False)
    assert str(e.value).startswith(bad.member(10).describe())


def test_one_key_per_cycle_only_where_the_wrapped_members_share_a_home():
    """A signal whose rank steps within each cycle and whose index steps by cycle: counted at each
    node's rank 0 (a local-folded build's homes), a cycle from rank 4 wrapped by one reaches back to
    rank 3, on node 0, so its members do not share one counter there."""
    t = dataclasses.replace(_row(1), signals=(Signal(G, "contrib", 0),),
                            step=dataclasses.replace(_row(1).step, signals=((1, 0),), outer=((0, G),)))
    home = count_homes(2 * G, G, 0, G)
    assert [t.member(i).signals[0].rank for i in range(G)] == [4, 5, 6, 3]
    fixed, moving = bump_keys(t, home=home)
    own = Counter((home[g.rank], g.name, g.index) for m in t.members() for g in m.signals)
    assert Counter(dict(fixed)) + Counter(moving) == own and own[(0, "contrib", 0)] == 1


@pytest.mark.parametrize("local", [0, 1, 3, G - 1])
def test_one_signal_keys_are_the_members_own_from_any_member(local):
    """A tile row's one flag (the GEMM's): the keys of any span, across cycles and wraps, are its members'."""
    row = _row(local)
    t = dataclasses.replace(row, signals=row.signals[:1], step=dataclasses.replace(
        row.step, signals=row.step.signals[:1], outer=row.step.outer[:1]))
    own = [(g.rank, g.name, g.index) for m in t.members() for g in m.signals]
    for first in range(t.count):
        for n in {1, 2, G - 1, G, G + 3, t.count - first} - {0}:
            n = min(n, t.count - first)
            keys, times, repeat = flat_keys(t, first, n)
            assert (_tuples(keys), times, repeat) == (own[first:first + n], 1, 1)
