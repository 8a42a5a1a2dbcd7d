"""Mutations every push schedule (GEMM+RS's and GEMM+AR's ``node_reduce = push``) must refuse."""
from __future__ import annotations

import dataclasses

import pytest

from mkernel.errors import ScheduleError
from mkernel.ir import Schedule


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
