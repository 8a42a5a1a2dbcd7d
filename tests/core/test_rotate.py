"""Groups whose members wrap (``Step.rotate``): a rank that takes a slot's tiles from its own on
(l .. G - 1, then 0 .. l - 1) is one group, not two (issue 30's every-node row: GEMM entries
122,880 -> 65,536).

The oracle is the member made one at a time: ``Task.member`` against the tiles written out by
hand, and every other reader of members (the signal keys of the builder and the simulator, the
region rows of validate's coverage and the hazard grids) against ``Task.member``. The builder's
wrapped groups must expand to its unwrapped ones, task for task (tests/sim/test_groups.py checks
them against the golden schedules too).
"""
from __future__ import annotations

import dataclasses

import numpy as np

import pytest

from mkernel import Cluster, ScheduleError, Workload, builders
from mkernel.builders import _tiling, gemm_ar
from mkernel.builders._tiling import grid_order_runs
from mkernel.ir import Op, Region, Role, Signal, Step, Task, expand
from mkernel.signal_table import bump_keys
from mkernel.members import member_rows, read_regions
from mkernel.sim.signals import flat_keys, signal_of

COLS = 64


def _wrapping(rotate: int = 2) -> Task:
    """Local rank 1 of 4 would start at tile 1; this one starts at tile 2 of a slot of 4."""
    return Task(0, 1, Role.COMPUTE, Op.GEMM,
                reads=(Region("A", 1, 0, 32, 0, 16), Region("B", 1, 0, 16, 2 * COLS, 3 * COLS)),
                writes=(Region("P", 1, 0, 32, 2 * COLS, 3 * COLS),),
                signals=(Signal(2, "contrib", 6), Signal(1, "out")),
                label="tile {}", count=4, step=Step(((0, 0, 0), (0, 0, COLS), (0, 0, COLS)), ((1, 1), (0, 0)),
                                                   label=(6, 1), rotate=rotate))


def test_members_wrap_from_count_minus_rotate_on():
    t = _wrapping()
    ms = t.members()
    assert [m.writes[0].col0 // COLS for m in ms] == [2, 3, 0, 1]
    assert [m.reads[1].col0 // COLS for m in ms] == [2, 3, 0, 1] and all(m.reads[0] == t.reads[0] for m in ms)
    assert [(m.signals[0].rank, m.signals[0].index) for m in ms] == [(2, 6), (3, 7), (0, 4), (1, 5)]
    assert [m.label for m in ms] == ["tile 6", "tile 7", "tile 4", "tile 5"] and [m.id for m in ms] == [0, 1, 2, 3]
    assert [t.offset(i) for i in range(4)] == [0, 1, -2, -1]
    plain = dataclasses.replace(t, step=dataclasses.replace(t.step, rotate=0))
    assert [m.writes[0].col0 // COLS for m in plain.members()] == [2, 3, 4, 5]


@pytest.mark.parametrize("rotate", [1, 2, 3])
def test_signal_keys_are_the_members_own(rotate):
    t = _wrapping(rotate)
    own = [(g.rank, g.name, g.index) for m in t.members() for g in m.signals]
    fixed, moving = bump_keys(t)
    assert fixed == [((1, "out", 0), 4)] and moving == [k for k in own if k[1] == "contrib"]
    for first, n in ((0, 4), (1, 2), (3, 1), (2, 2)):
        keys, times, repeat = flat_keys(t, first, n)
        assert _tuples(keys * repeat) == own[2 * first:2 * (first + n)] and times == 1


def _tuples(keys: list[int]) -> list[tuple]:
    """The simulator's signal keys as (rank, name, index)."""
    return [(g.rank, g.name, g.index) for g in map(signal_of, keys)]


def test_region_rows_are_the_members_own():
    """read_regions + member_rows (validate's coverage, the hazard grids) against the expanded
    schedule's regions, on a build whose ranks wrap their slots."""
    s = builders.get("gemm_ar").build(Workload(m=512, n=1024, k=64, chunk_tiles=2), Cluster("t", 2, 4), grouped=True)
    assert any(t.count > 1 and t.step.rotate for t in s.tasks)
    recs, f, codes = read_regions(s)
    counts = np.array([t.count for t in s.tasks])
    _, _, rows = member_rows(recs, np.bincount(f["entry"], minlength=len(s.tasks)), counts)
    names = {c: name for name, c in codes.items()}
    got = list(zip(map(names.get, rows["buffer"].tolist()), *(rows[k].tolist() for k in
                                                            ("rank", "row0", "row1", "col0", "col1"))))
    want = [(r.buffer, r.rank, r.row0, r.row1, r.col0, r.col1) for t in expand(s).tasks for r in t.reads + t.writes]
    assert got == want


@pytest.mark.parametrize("nodes,gpus", [(2, 4), (1, 4), (3, 2)])
def test_each_ranks_rows_are_one_group_each(nodes, gpus, monkeypatch):
    w, c = Workload(m=512, n=1024, k=64, chunk_tiles=2), Cluster("t", nodes, gpus)
    m = builders.get("gemm_ar")
    s = m.build(w, c, grouped=True)
    # The oracle: the same build with no wrapped groups and no cycles joined (a slot in two plain
    # groups), whose members go through neither Step.rotate nor Step.period; the flat build would not
    # do, as it expands through Task.members. Each owner's groups cut from its own order (not owner 0's
    # moved on and wrapped: _tiling.dealt_order_runs_of).
    monkeypatch.setattr(_tiling, "cycled_order_runs", lambda m, n, tm, tn, order, period, rel: [
        (a, k, 0, 0) for a, k in grid_order_runs(m, n, tm, tn, order, period)])
    monkeypatch.setattr(gemm_ar, "dealt_order_runs_of", lambda m, n, tm, tn, g, ct, order, locals_, *rest: {
        local: _tiling.dealt_order_runs(m, n, tm, tn, g, ct, order, local, *rest) for local in locals_})
    plain = m.build(w, c, grouped=True)
    assert gpus == 1 or (any(t.step and t.step.rotate for t in s.tasks)
                         and not any(t.step and t.step.rotate for t in plain.tasks))
    assert expand(s).tasks == expand(plain).tasks
    for rank in range(c.world):
        gemms = [t for t in s.tasks if t.rank == rank and t.op is Op.GEMM]
        assert all(t.count % gpus == 0 and t.step.rotate == (rank % gpus if t.count > 1 else 0) for t in gemms)
        assert all(t.step.period == (gpus if t.count > gpus else 0) for t in gemms)  # (a row of cycles)
    assert any(t.count > gpus for t in s.tasks if t.op is Op.GEMM and t.rank % gpus) or w.n // w.tile_n == gpus
    s.validate()


@pytest.mark.parametrize("signal_step", [(1, 1), (0, 1)])  # ranks step (every rule at the extremes), or not (bounds)
def test_validate_refuses_a_wrap_past_the_buffer_naming_the_member(signal_step):
    """Local rank 1 of 4 starts its slots at tile 1; wrapping them from tile 2 takes member 2 one
    tile left of the buffer. validate() must name member 2 (the last member and the rest are inside)."""
    s = builders.get("gemm_ar").build(Workload(m=512, n=1024, k=64, chunk_tiles=2), Cluster("t", 1, 4), grouped=True)
    p = next(t.id for t in s.tasks if t.rank == 1 and t.op is Op.GEMM
             and t.writes[0].col0 == t.writes[0].col1 - t.writes[0].col0)  # (starting at tile 1 of its row)
    t = s.tasks[p]
    bad = dataclasses.replace(t, step=dataclasses.replace(t.step, signals=(signal_step,), rotate=2))
    assert bad.member(3).writes[0].col0 == 0 and bad.member(2).writes[0].col0 < 0
    with pytest.raises(ScheduleError) as e:
        dataclasses.replace(s, tasks=s.tasks[:p] + (bad,) + s.tasks[p + 1:]).validate(races=False)
    assert str(e.value).startswith(bad.member(2).describe())
