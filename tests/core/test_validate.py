"""Schedule.validate(): every rule rejects a schedule that breaks it, naming the task."""
from __future__ import annotations

import dataclasses

import pytest

from mkernel import BufferKind, Op, Region, Role, ScheduleError, Signal, Wait
from mkernel.ir import Buffer


def with_task(s, index, **changes):
    tasks = list(s.tasks)
    tasks[index] = dataclasses.replace(tasks[index], **changes)
    return dataclasses.replace(s, tasks=tuple(tasks))


def test_tiny_schedule_is_valid(tiny):
    tiny.validate()


def test_wait_that_nothing_signals(tiny):
    bad = with_task(tiny, 1, waits=(Wait(Signal(0, "ghost"), 1),))
    with pytest.raises(ScheduleError, match=r"task 1 .*ghost\[0\]@0, which no task signals"):
        bad.validate()


def test_counter_that_can_never_reach_its_count(tiny):
    bad = with_task(tiny, 1, waits=(Wait(Signal(0, "done"), 2),))
    with pytest.raises(ScheduleError, match=r"task 1 .*>= 2, but only 1 tasks bump it"):
        bad.validate()


def test_dependency_cycle(tiny):
    # task 0 now waits for the drain, which waits for task 0.
    bad = with_task(tiny, 0, waits=(Wait(Signal(0, "drained"), 1),))
    bad = with_task(bad, 1, signals=(Signal(0, "drained"),))
    with pytest.raises(ScheduleError, match=r"dependency cycle: task [01] .* -> task [01] .* -> task [01]"):
        bad.validate()


def test_cycle_through_launch_order(tiny):
    # A task of a later launch signals what a task of the earlier launch waits on.
    two = dataclasses.replace(tiny, launches=tiny.launches + (tiny.launches[0],))
    bad = with_task(two, 3, launch=1, signals=(Signal(1, "late"),))
    bad = with_task(bad, 2, waits=(Wait(Signal(1, "late"), 1),))
    with pytest.raises(ScheduleError, match="dependency cycle"):
        bad.validate()


def test_cycle_through_launch_order_of_the_second_rank(tiny):
    # Both ranks' drains in the later launch: each rank's launch order is its own barrier (rank 1's the
    # second). Rank 1's drain no longer waits for its copy, which waits for the drain: only rank 1's
    # launch order closes the loop (found by the cycle rule, the race check left out).
    two = dataclasses.replace(tiny, launches=tiny.launches + (tiny.launches[0],))
    later = with_task(with_task(two, 1, launch=1), 3, launch=1)
    later.validate(races=False)
    bad = with_task(later, 3, waits=(), signals=(Signal(1, "late"),))
    bad = with_task(bad, 2, waits=(Wait(Signal(1, "late"), 1),))
    with pytest.raises(ScheduleError, match="dependency cycle"):
        bad.validate(races=False)


@pytest.mark.parametrize("region", [
    Region("X", 0, 0, 5, 0, 4),  # one row past the end
    Region("X", 0, 0, 4, 2, 2),  # empty
    Region("X", 7, 0, 4, 0, 4),  # a rank that does not exist
    Region("Y", 0, 0, 4, 0, 4),  # an unknown buffer
])
def test_access_outside_a_buffer(tiny, region):
    bad = with_task(tiny, 0, reads=(region,), writes=(Region("OUT", 0, 0, 4, 0, 4),))
    with pytest.raises(ScheduleError, match=r"task 0 "):
        bad.validate()


def test_role_without_sms(tiny):
    bad = with_task(tiny, 1, role=Role.SEND)
    with pytest.raises(ScheduleError, match=r"task 1 .*role send has no SMs in launch 'k'"):
        bad.validate()


def test_output_element_written_twice_and_never(tiny):
    # Rank 0's copy writes rows 0..2 only: rows 2..4 are never written.
    bad = with_task(tiny, 0, reads=(Region("X", 0, 0, 2, 0, 4),), writes=(Region("OUT", 0, 0, 2, 0, 4),))
    with pytest.raises(ScheduleError, match=r"output OUT on rank 0: element \(2, 0\) is written 0 times, expected 1"):
        bad.validate()
    twice = dataclasses.replace(tiny, tasks=tiny.tasks + (dataclasses.replace(tiny.tasks[0], id=4),))
    with pytest.raises(ScheduleError, match=r"element \(0, 0\) is written 2 times, expected 1 \(by tasks \[0, 4\]\)"):
        twice.validate()


def test_output_not_reduced_the_expected_number_of_times(tiny):
    # OUT expects two contributions per element (like an atomic-add reduce-scatter); it gets one.
    buffers = tuple(dataclasses.replace(b, writes_per_element=2) if b.kind is BufferKind.OUTPUT else b
                    for b in tiny.buffers)
    bad = dataclasses.replace(tiny, buffers=buffers)
    with pytest.raises(ScheduleError, match=r"written 1 times, expected 2"):
        bad.validate()
    extra = dataclasses.replace(tiny.tasks[0], id=4, accumulate=True, signals=())
    half = dataclasses.replace(bad, tasks=tiny.tasks + (extra,))
    with pytest.raises(ScheduleError, match=r"OUT on rank 1: element \(0, 0\) is written 1 times"):
        half.validate()  # rank 0 now has its two contributions; rank 1 still lacks one


def test_locality_rules(tiny):
    with pytest.raises(ScheduleError, match="waits poll local memory"):
        with_task(tiny, 1, waits=(Wait(Signal(1, "done"), 1),)).validate()
    with pytest.raises(ScheduleError, match="a put writes to a rank of another node"):
        with_task(tiny, 0, op=Op.PUT, role=Role.COMPUTE, writes=(Region("OUT", 1, 0, 4, 0, 4),)).validate()


def test_writing_an_input_is_refused(tiny):
    with pytest.raises(ScheduleError, match="writes input buffer"):
        with_task(tiny, 0, writes=(Region("X", 0, 0, 4, 0, 4),)).validate()


def test_gemm_shapes_must_chain(tiny):
    buffers = tiny.buffers + (Buffer("W", 3, 4, kind=BufferKind.INPUT),)
    bad = with_task(dataclasses.replace(tiny, buffers=buffers), 0, op=Op.GEMM,
                    reads=(Region("X", 0, 0, 4, 0, 4), Region("W", 0, 0, 3, 0, 4)))
    with pytest.raises(ScheduleError, match="gemm shapes do not chain"):
        bad.validate()


def _reader(s, waits):
    """The schedule plus a rank-0 intra task copying OUT@0 into a scratch buffer S."""
    task = dataclasses.replace(s.tasks[0], id=len(s.tasks), role=Role.INTRA, op=Op.COPY, label="reader",
                               reads=(Region("OUT", 0, 0, 4, 0, 4),), writes=(Region("S", 0, 0, 4, 0, 4),),
                               waits=waits, signals=())
    return dataclasses.replace(s, buffers=s.buffers + (Buffer("S", 4, 4),), tasks=s.tasks + (task,))


def test_a_read_no_wait_orders_after_its_write_is_a_race(tiny):
    with pytest.raises(ScheduleError, match=r"race: task 0 \(copy 'copy', rank 0, role compute\) and task 4 "
                                            r"\(copy 'reader'.* read and write overlapping memory \(OUT@0"):
        _reader(tiny, waits=()).validate()


def test_the_same_read_after_a_wait_on_the_writer_is_fine(tiny):
    _reader(tiny, waits=(Wait(Signal(0, "done"), 1),)).validate()


def test_gemm_ar_recv_without_waiting_for_its_own_sums_is_a_race():
    """The bug this rule found: the remote add read this node's partial sums without waiting for them."""
    from mkernel import Cluster, Workload
    from mkernel.builders import gemm_ar

    s = gemm_ar.build(Workload(m=256, n=512, k=32), Cluster("t", 2, 2))
    tasks = [dataclasses.replace(t, waits=t.waits[:1]) if t.role is Role.RECV else t for t in s.tasks]
    with pytest.raises(ScheduleError, match=r"race: .*(reduce 'tile \d+ reduce'|add remote).*PART@"):
        dataclasses.replace(s, tasks=tuple(tasks)).validate()
