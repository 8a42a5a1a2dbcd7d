"""validate() on grouped schedules (issue 30): the rules over pairs of tasks judge a grouped schedule
as they judge its expansion, without making its members where they need not.

The oracles are the expanded schedule's, here in the test: its members' happens-before graph (every
member edge is an edge between their groups, so no cycle among groups means none among members),
validate() of the expanded schedule (cycles), and a brute-force count of every element of every
output (coverage). Each op's grouped builds pass; mutations must fail with the expanded schedule's
message: a cycle through a group, output elements a group's member covers twice or leaves unwritten.
"""
from __future__ import annotations

import dataclasses
import functools
import random

import numpy as np
import pytest
from harness import golden_schedules as golden

from mkernel import BufferKind, Op, Region, Role, ScheduleError, Signal, Wait
from mkernel.coverage import check_outputs
from mkernel.ir import Buffer, Schedule, Step, expand
from mkernel.races import happens_before_graph, topological_order
from mkernel.schedule_builder import ScheduleBuilder

SHAPES = {  # 2 x 4 shapes whose builds have groups of every kind the full builders make (rank steps included)
    "gemm_ar": dict(m=2048, n=2048, k=64), "gemm_rs": dict(m=2048, n=2048, k=64),
    "ag_gemm": dict(m=1024, n=1024, k=64), "ring_attention": dict(m=1024, n=2, k=128, tile_m=128),
    "moe_dispatch_gemm": dict(n=1024),
}


@functools.lru_cache(maxsize=1)
def _schedules() -> tuple[Schedule, ...]:
    """The fused and baseline grouped builds of the first 2 x 4 variant of every op."""
    out, seen = [], set()
    for name, w, c, first in golden.cases():
        if first or "/2x4/" not in name or w.kernel in seen:
            continue
        seen.add(w.kernel)
        out += golden.build_pair_grouped(dataclasses.replace(w, **SHAPES[w.kernel]), c, 0)
    return tuple(out)


def _names(schedules) -> list[str]:
    return [f"{s.kernel}/{s.variant}" for s in schedules]


CASES = _schedules()


@pytest.mark.parametrize("s", CASES, ids=_names(CASES))
def test_the_group_graph_holds_every_member_edge(s):
    """The cycle rule's coarsening: each edge of the members' graph joins their groups (or a group
    and a launch barrier), so a topological order of groups orders the members too."""
    assert len(s.tasks) < sum(t.count for t in s.tasks)  # there are groups
    groups, members = happens_before_graph(s, every_signaler=True), happens_before_graph(expand(s), every_signaler=True)
    n, flat = len(s.tasks), sum(t.count for t in s.tasks)
    assert len(groups) - n == len(members) - flat  # the same barriers, in the same order
    group_of = np.concatenate([np.repeat(np.arange(n), [t.count for t in s.tasks]),
                               np.arange(n, len(groups))])
    member_edges = {(int(group_of[p]), int(group_of[v])) for v, ps in enumerate(members) for p in ps}
    assert member_edges <= {(p, v) for v, ps in enumerate(groups) for p in ps}
    assert len(topological_order(groups)) == len(groups)
    assert len(topological_order(members)) == len(members)
    s.validate()


def _coverage_oracle(flat: Schedule) -> str | None:
    """The output rule's verdict on a flat schedule by counting every element of every output."""
    writes: dict = {}
    for t in flat.tasks:
        for r in t.writes:
            writes.setdefault((r.buffer, r.rank), []).append((r, t.id))
    for buf in (b for b in flat.buffers if b.kind is BufferKind.OUTPUT):
        for rank in range(flat.world):
            count = np.zeros((buf.rows, buf.cols), dtype=np.int64)
            for r, _ in writes.get((buf.name, rank), []):
                count[r.row0:r.row1, r.col0:r.col1] += 1
            bad = np.argwhere(count != buf.writes_per_element)
            if len(bad):
                row, col = (int(x) for x in bad[0])
                by = [i for r, i in writes.get((buf.name, rank), []) if r.row0 <= row < r.row1 and r.col0 <= col < r.col1]
                return (f"output {buf.name} on rank {rank}: element ({row}, {col}) is written {count[row, col]} times, "
                        f"expected {buf.writes_per_element}" + (f" (by tasks {by})" if by else " (by no task)"))
    return None


def _coverage(s: Schedule) -> str | None:
    try:
        check_outputs(s, {b.name: b for b in s.buffers})
    except ScheduleError as e:
        return str(e)
    return None


def _output_groups(s: Schedule) -> list[int]:
    outputs = {b.name for b in s.buffers if b.kind is BufferKind.OUTPUT}
    return [t.id for t in s.tasks if t.count > 1 and any(r.buffer in outputs for r in t.writes)]


def _with(s: Schedule, task) -> Schedule:
    return dataclasses.replace(s, tasks=s.tasks[:task.id] + (task,) + s.tasks[task.id + 1:])


def _zeroed(s: Schedule, t) -> Schedule | None:
    """``s`` with ``t``'s output regions not stepping: every member writes member 0's (None if none steps)."""
    outputs = {b.name for b in s.buffers if b.kind is BufferKind.OUTPUT}
    n = len(t.reads)
    regions = tuple((0, 0, 0) if k >= n and t.writes[k - n].buffer in outputs else st
                    for k, st in enumerate(t.step.regions))
    return None if regions == t.step.regions else _with(s, dataclasses.replace(t, step=dataclasses.replace(t.step, regions=regions)))


def _mutations(s: Schedule, rng: random.Random):
    """Schedules with one output-writing group changed: its output regions' steps zeroed (member
    0's region written by every member, the others' by none), its last member dropped, or the group
    written a second time by a copy at the end."""
    for tid in rng.sample(_output_groups(s), min(4, len(_output_groups(s)))):
        t = s.tasks[tid]
        yield from [m for m in (_zeroed(s, t), _with(s, dataclasses.replace(t, count=t.count - 1))) if m]
        yield dataclasses.replace(s, tasks=s.tasks + (dataclasses.replace(t, id=len(s.tasks)),))


def _broadcast() -> Schedule:
    """Rank 0 copies its X into every rank's OUT, each waiting for its copy: one group whose write
    steps by rank (no builder's does)."""
    sb = ScheduleBuilder("t", "fused", 4, 4, 8, grouped=True)
    sb.buffer("X", 4, 8, kind=BufferKind.INPUT)
    sb.buffer("OUT", 4, 8, kind=BufferKind.OUTPUT)
    sb.launch("l", {Role.INTRA: 2})
    sb.add(0, Role.INTRA, Op.COPY, reads=(Region("X", 0, 0, 4, 0, 8),), writes=(Region("OUT", 0, 0, 4, 0, 8),),
           signals=(Signal(0, "sent"),), label="to {}", count=4, step=Step(((0, 0, 0), (1, 0, 0)), ((1, 0),), label=(0, 1)))
    for rank in range(4):
        sb.add(rank, Role.INTRA, Op.NOP, waits=(Wait(Signal(rank, "sent"), 1),), label="drain")
    return sb.build(0.0)


OUTPUT_CASES = [s for s in CASES if _output_groups(s)] + [_broadcast()]


@pytest.mark.parametrize("s", OUTPUT_CASES, ids=_names(OUTPUT_CASES))
def test_output_coverage_of_groups_is_the_expanded_count(s):
    assert _coverage(s) is None and _coverage_oracle(expand(s)) is None
    for bad in _mutations(s, random.Random(f"{s.kernel}/{s.variant}")):
        want = _coverage_oracle(expand(bad))
        assert want is not None and _coverage(bad) == want


def test_an_output_no_task_writes():
    s = _racy()
    s = dataclasses.replace(s, buffers=s.buffers + (Buffer("O", 2, 2, kind=BufferKind.OUTPUT),))
    assert _coverage(s) == _coverage_oracle(expand(s)) == ("output O on rank 0: element (0, 0) is written 0 times, "
                                                           "expected 1 (by no task)")


def test_a_zeroed_step_fails_validate_with_the_expanded_message():
    for s in (next(s for s in CASES if s.kernel == "gemm_ar" and s.variant == "fused"), _broadcast()):
        s.validate()
        bad = next(m for m in (_zeroed(s, s.tasks[i]) for i in _output_groups(s)) if m)
        with pytest.raises(ScheduleError) as grouped:
            bad.validate(races=False)
        assert str(grouped.value) == _coverage_oracle(expand(bad))


def _chain(waits_from: int) -> Schedule:
    """On one rank: A1 (members 0, 1) and A2 (members 2, 3) bump a[i]; member i of B waits for a[i]
    and bumps b[i]; member j of A2 waits for b[waits_from + j]. From 0: no member cycle (A2's
    members wait for B's first two, which wait for A1's), but B and A2 wait for each other; from 2:
    A2's member j and B's member 2 + j wait for each other."""
    sb = ScheduleBuilder("t", "fused", 2, 2, 8, grouped=True)
    sb.launch("l", {Role.COMPUTE: 2})
    sb.add(0, Role.COMPUTE, Op.NOP, signals=(Signal(0, "a", 0),), label="a {}", count=2,
           step=Step(signals=((0, 1),), label=(0, 1)))
    sb.add(0, Role.COMPUTE, Op.NOP, waits=(Wait(Signal(0, "b", waits_from), 1),), signals=(Signal(0, "a", 2),),
           label="a {}", count=2, step=Step(signals=((0, 1),), waits=(1,), label=(2, 1)))
    sb.add(0, Role.COMPUTE, Op.NOP, waits=(Wait(Signal(0, "a", 0), 1),), signals=(Signal(0, "b", 0),),
           label="b {}", count=4, step=Step(signals=((0, 1),), waits=(1,), label=(0, 1)))
    return sb.build(0.0)


def _has_cycle(s: Schedule) -> bool:
    preds = happens_before_graph(s, every_signaler=True)
    return len(topological_order(preds)) < len(preds)


def test_a_cycle_only_groups_make_raises_nothing():
    s = _chain(0)
    assert _has_cycle(s) and not _has_cycle(expand(s))  # the group graph's cycle is spurious
    s.validate()
    expand(s).validate()


def test_a_cycle_through_groups_names_the_members_as_the_expanded_check_does():
    s = _chain(2)
    with pytest.raises(ScheduleError) as flat:
        expand(s).validate()
    with pytest.raises(ScheduleError) as grouped:
        s.validate()
    assert str(grouped.value) == str(flat.value) == ("dependency cycle: task 6 (nop 'b 2', rank 0, role compute) -> "
                                                     "task 2 (nop 'a 2', rank 0, role compute) -> task 6 (nop 'b 2', "
                                                     "rank 0, role compute)")


@pytest.mark.parametrize("s", CASES[:4], ids=_names(CASES[:4]))
def test_a_cycle_through_a_builders_group_and_launch_order(s):
    """A group waits for a task of a launch after the last on its rank: the group's members are in the cycle."""
    t = next(t for t in s.tasks if t.count > 1)
    late = Signal(t.rank, "late")
    step = dataclasses.replace(t.step, waits=t.step.waits + (0,)) if t.step.waits else t.step
    looped = dataclasses.replace(t, waits=t.waits + (Wait(late, 1),), step=step)
    nop = dataclasses.replace(t, id=len(s.tasks), op=Op.NOP, reads=(), writes=(), waits=(), signals=(late,),
                              launch=len(s.launches), label="late", count=1, step=None, chunk=-1)
    bad = dataclasses.replace(s, launches=s.launches + (s.launches[t.launch],),
                              tasks=s.tasks[:t.id] + (looped,) + s.tasks[t.id + 1:] + (nop,))
    with pytest.raises(ScheduleError) as flat:
        expand(bad).validate(races=False)
    with pytest.raises(ScheduleError) as grouped:
        bad.validate(races=False)
    assert str(grouped.value) == str(flat.value) and str(flat.value).startswith("dependency cycle")


def _racy() -> Schedule:
    """A group of 4 copies writing S's rows one by one, and a read of S that waits for none of them."""
    sb = ScheduleBuilder("t", "fused", 2, 2, 8, grouped=True)
    sb.buffer("X", 4, 8, kind=BufferKind.INPUT)
    sb.buffer("S", 4, 8)
    sb.buffer("T", 4, 8)
    sb.launch("l", {Role.COMPUTE: 2, Role.INTRA: 2})
    sb.add(0, Role.COMPUTE, Op.COPY, reads=(Region("X", 0, 0, 1, 0, 8),), writes=(Region("S", 0, 0, 1, 0, 8),),
           label="w {}", count=4, step=Step(((0, 1, 0), (0, 1, 0)), label=(0, 1)))
    sb.add(0, Role.INTRA, Op.COPY, reads=(Region("S", 0, 0, 4, 0, 8),), writes=(Region("T", 0, 0, 4, 0, 8),), label="r")
    return sb.build(0.0)


def test_the_race_rule_is_decided_by_the_member_count(monkeypatch):
    """Above the limit by members (not by tasks) the race check is skipped without expanding; at
    it, it runs on the expanded schedule and names the members."""
    import mkernel.races
    from mkernel import validation as validate
    s = _racy()
    expanded = []
    monkeypatch.setattr(validate, "expand", lambda s: expanded.append(s) or expand(s))
    for module in (mkernel.races, validate):
        monkeypatch.setattr(module, "RACE_CHECK_MAX_TASKS", 4)  # 2 tasks, 5 members
    s.validate()
    assert expanded == []
    for module in (mkernel.races, validate):
        monkeypatch.setattr(module, "RACE_CHECK_MAX_TASKS", 5)
    with pytest.raises(ScheduleError, match=r"race: task 0 \(copy 'w 0'.* and task 4 \(copy 'r'"):
        s.validate()
    assert len(expanded) == 1


def test_cycling_signals_give_the_group_graph_every_members_keys():
    """A group whose signals cycle (``Step.period``): a wait on any member's key depends on it."""
    sb = ScheduleBuilder("t", "fused", 4, 4, 8, grouped=True)
    sb.buffer("X", 4, 64)
    sb.launch("l", {Role.COMPUTE: 2})
    sb.add(0, Role.COMPUTE, Op.NOP, signals=(Signal(0, "s", 0),), label="c {}", count=6,
           step=Step(signals=((1, 1),), label=(0, 1), period=3, outer=((0, 10),)))
    sb.add(2, Role.COMPUTE, Op.NOP, waits=(Wait(Signal(2, "s", 12), 1),), label="w")  # member 5's: rank 2, index 12
    s = sb.build(0.0)
    assert happens_before_graph(s, every_signaler=True)[1] == [0]
    s.validate()
