"""What the network reads of a put's group once (sim/network.py's ``Put``) against the IR's own reads of each
member: its destination (:meth:`Task.region_rank` of its first write) and its flag keys (:func:`flat_keys` of that
one member), for the real grouped puts of the larger GEMM+AR and for groups that step every way a group can."""
from __future__ import annotations

import pytest

from mkernel import Cluster, Workload, builders
from mkernel.ir import Op, Region, Role, Signal, Step, Task
from mkernel.sim.network import Put
from mkernel.sim.signals import flat_keys

ITEMSIZE = {"X": 2, "Y": 2}


def _put(count: int, step: Step, signals: int) -> Task:
    return Task(0, 1, Role.SEND, Op.PUT, reads=(Region("X", 1, 0, 4, 0, 4),), writes=(Region("Y", 2, 0, 4, 0, 4),),
                signals=tuple(Signal(2, f"f{j}", j) for j in range(signals)), count=count, step=step)


GROUPS = {
    "plain task": _put(1, Step(), 1),
    "no flag": _put(4, Step(((0, 0, 4), (1, 0, 4))), 0),
    "a fixed flag": _put(4, Step(((0, 0, 4), (1, 0, 4))), 1),  # (a node sum's ready flag: one key, n bumps)
    "two fixed flags": _put(4, Step(((0, 0, 4), (1, 0, 4))), 2),
    "more fixed flags than members": _put(2, Step(((0, 0, 4), (1, 0, 4))), 3),  # (the list repeated, not split)
    "stepping flags": _put(6, Step(((0, 0, 4), (2, 0, 4)), ((1, 1), (0, 3))), 2),
    "one stepping flag, wrapped": _put(4, Step(((0, 0, 4), (1, 0, 4)), ((1, 1),), rotate=3), 1),
    "two stepping flags, wrapped": _put(4, Step(((0, 0, 4), (-1, 0, 4)), ((1, 1), (1, 2)), rotate=1), 2),
    "cycling flag, wrapped": _put(6, Step(((0, 0, 4), (1, 0, 4)), ((1, 0),), period=3, outer=((0, 1),), rotate=1), 1),
    "cycling flags": _put(4, Step(((0, 0, 4), (1, 0, 4)), ((1, 0), (1, 1)), period=2, outer=((0, 1), (0, 2))), 2),
    "a fixed destination": _put(4, Step(((0, 0, 4), (0, 0, 4)), ((0, 1),)), 1),
}


def _same(t: Task, itemsize: dict[str, int]) -> None:
    put = Put(t, itemsize)
    assert put.src == t.rank and put.nbytes == sum(r.size * itemsize[r.buffer] for r in t.reads)
    for i in range(t.count):
        keys, times, repeat = flat_keys(t, i, 1)
        assert (put.dst(i), put.keys_of(i), times, repeat) == (t.region_rank(len(t.reads), i), keys, 1, 1), i


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_a_group_read_once_reads_each_member_as_the_ir_does(name):
    _same(GROUPS[name], ITEMSIZE)


def test_the_grouped_puts_of_the_larger_gemm_ar_read_once_are_their_members():
    c = Cluster("t", 2, 2)
    s = builders.get("gemm_ar").build(Workload(kernel="gemm_ar", m=1024, n=1024, k=64), c, grouped=True)
    puts = [t for t in s.tasks if t.op is Op.PUT]
    assert any(t.count > 1 for t in puts)
    for t in puts:
        _same(t, {b.name: b.itemsize for b in s.buffers})
