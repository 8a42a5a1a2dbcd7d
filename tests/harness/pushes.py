"""What every push schedule (GEMM+RS's and GEMM+AR's ``node_reduce = push``) must keep: node symmetry and
groups that expand to the flat build, and the mutations it must refuse."""
from __future__ import annotations

import dataclasses

import pytest

from mkernel.cluster import Cluster
from mkernel.errors import ScheduleError
from mkernel.ir import Schedule, expand
from mkernel.problems import Workload
from mkernel.sim import SimBackend
from mkernel.sim.collapse import collapse, is_node_symmetric


def assert_push_mutations_caught(s: Schedule) -> None:
    """Drop one push and its owner's copy out waits for a bump that never comes (validate's count
    rule); take away a push's wait for the owner's base and the owner's plain store of its own partial
    races with the peer's add (the race rule): the base is what makes the accumulator start at the
    owner's partial in every call, with nothing zeroed."""
    push = next(t for t in s.tasks if t.accumulate)
    dropped = dataclasses.replace(s, tasks=tuple(dataclasses.replace(t, id=i) for i, t in
                                                  enumerate(t for t in s.tasks if t.id != push.id)))
    with pytest.raises(ScheduleError, match="pushed"):
        dropped.validate()
    unguarded = dataclasses.replace(push, waits=push.waits[:1])
    racy = dataclasses.replace(s, tasks=tuple(unguarded if t.id == push.id else t for t in s.tasks))
    with pytest.raises(ScheduleError, match="race"):
        racy.validate()


def assert_symmetric_and_grouped(builder, w: Workload, c: Cluster) -> None:
    """What the simulator's collapsed runs and grouped builds trust (ScheduleBuilder): the full push
    schedule folds onto the build of the first node alone, task for task, times the same, and a
    grouped build expands to the flat one. ``builder`` is the op's module."""
    full, part = builder.build(w, c), builder.build(w, c, first_nodes=1)
    part.validate()
    assert is_node_symmetric(full) and collapse(full).tasks == collapse(part).tasks
    assert SimBackend().run(part, c).time_s == pytest.approx(SimBackend().run(full, c).time_s, rel=1e-9)
    grouped = builder.build(w, c, grouped=True)
    assert len(grouped.tasks) < len(full.tasks) and expand(grouped).tasks == full.tasks
