"""``ScheduleBuilder.bumped`` (what a drain's wait expects) against every task's own bump keys.

``bumped`` counts a name's bumps lazily, from where it last stopped. The oracle is one Counter of ``bump_keys`` over every task of
finished builds (grouped: signals fixed, stepping, cycling; folded to their first nodes and to
local rank 0, where bumps count at home ranks): ``bumped`` must give it for every key, asked in
any order, and in a builder that asks before every task is in.
"""
from __future__ import annotations

from collections import Counter

import pytest

from mkernel import Cluster, Workload, builders
from mkernel.ir import Op, Role, Signal, Step, Task
from mkernel.signal_table import bump_keys
from mkernel.schedule_builder import ScheduleBuilder

W = Workload(m=512, n=1024, k=64, chunk_tiles=2)


def _cases():
    for kernel, c, kw in (("gemm_ar", Cluster("t", 2, 4), {}), ("gemm_ar", Cluster("t", 2, 4), {"first_nodes": 1}),
                          ("gemm_ar", Cluster("t", 2, 4), {"first_nodes": 1, "local_fold": True}),
                          ("gemm_rs", Cluster("t", 2, 2), {}), ("ag_gemm", Cluster("t", 2, 2), {})):
        yield pytest.param(kernel, c, kw, id=f"{kernel}-{c.nodes}x{c.gpus_per_node}-{'-'.join(kw) or 'full'}")


@pytest.mark.parametrize("kernel,c,kw", list(_cases()))
def test_bumped_counts_what_bump_keys_lists(kernel, c, kw):
    s = builders.get(kernel).build(W, c, grouped=True, **kw)
    sb = ScheduleBuilder(s.kernel, s.variant, s.world, s.gpus_per_node, s.num_sms, grouped=True, **kw)
    want: Counter = Counter()
    for t in s.tasks:
        fixed, moving = bump_keys(t, home=sb._home)
        for key, times in fixed:
            want[key] += times
        want.update(moving)
    assert want and (kernel != "gemm_ar" or any(t.count > 1 and t.step.signals for t in s.tasks))  # (stepping ones)
    half = len(s.tasks) // 2
    sb.tasks += s.tasks[:half]  # asked once before the rest is in: counted on from where it stopped
    for rank, name, index in want:
        sb.bumped(Signal(rank, name, index))
    sb.tasks += s.tasks[half:]
    for (rank, name, index), times in sorted(want.items(), key=repr, reverse=True):
        assert sb.bumped(Signal(rank, name, index)) == times, (rank, name, index)


def test_a_name_bumped_by_a_stepping_group_and_by_plain_tasks_counts_both():
    """One name bumped by a group whose member steps its index (beside a signal that stays) and by a
    plain task after it: asked once, every key counts as bump_keys lists it."""
    sb = ScheduleBuilder("k", "v", 2, 2, 4)
    sb.tasks += [Task(0, 0, Role.COMPUTE, Op.GEMM, signals=(Signal(0, "y", 0), Signal(0, "x", 0)), count=2,
                      step=Step(signals=((0, 0), (0, 1)))),
                 Task(1, 0, Role.COMPUTE, Op.GEMM, signals=(Signal(0, "x", 5),)),
                 Task(2, 1, Role.COMPUTE, Op.GEMM, signals=(Signal(0, "x", 1),), count=3, step=Step())]
    assert [sb.bumped(Signal(0, "x", i)) for i in (0, 1, 5)] == [1, 4, 1]
    assert sb.bumped(Signal(0, "y", 0)) == 2


def test_a_group_whose_later_signal_of_the_name_steps_counts_it_stepping():
    """The first signal of the name stays, a later one of it steps (told apart past the first): each
    member bumps its own key of the later one; beside it, a tuple of three signals (counted by tuple)."""
    sb = ScheduleBuilder("k", "v", 2, 2, 4)
    sb.tasks += [Task(0, 0, Role.COMPUTE, Op.GEMM, signals=(Signal(0, "x", 0), Signal(0, "x", 10)), count=3,
                      step=Step(signals=((0, 0), (0, 1)))),
                 Task(1, 0, Role.COMPUTE, Op.GEMM, signals=(Signal(0, "x", 0), Signal(1, "x", 0), Signal(0, "y")),
                      count=2, step=Step())]
    assert [sb.bumped(Signal(0, "x", i)) for i in (0, 10, 11, 12, 13)] == [5, 1, 1, 1, 0]
    assert sb.bumped(Signal(1, "x", 0)) == 2


def test_signals_of_one_or_two_count_each_one_of_the_name_met_again_or_not():
    """Tuples of one or two signals that do not step: counted by the signal of the name they share
    with the tasks before (one object met again and again, another between, then the first again),
    and a pair's second signal of the name counted too."""
    sb = ScheduleBuilder("k", "v", 2, 2, 4)
    done, other = Signal(0, "x", 0), Signal(1, "x", 2)
    sb.tasks += [Task(0, 0, Role.COMPUTE, Op.GEMM, signals=(Signal(0, "y"), done), count=3, step=Step()),
                 Task(1, 0, Role.COMPUTE, Op.GEMM, signals=(done,)),
                 Task(2, 0, Role.COMPUTE, Op.GEMM, signals=(other, Signal(0, "x", 0)), count=2, step=Step()),
                 Task(3, 0, Role.COMPUTE, Op.GEMM, signals=(done, Signal(0, "x", 7)), count=4, step=Step()),
                 Task(4, 0, Role.COMPUTE, Op.GEMM, signals=(Signal(0, "y"),))]
    assert [sb.bumped(Signal(0, "x", i)) for i in (0, 7)] == [3 + 1 + 2 + 4, 4]
    assert sb.bumped(other) == 2 and sb.bumped(Signal(0, "y")) == 4
