"""validate() reads some inputs once and hands them to several rules (each entry's rank and launch to
the signal and cycle rules; the member counts of the signal table to output coverage and the race
check's size; read counts from the region table to the screen and coverage). Each rule still
computes them itself when called alone, so the oracle here is the rule called alone: on planted
faults in grouped builds (a wait counted one too many, a cycle closed through a new flag, an output
tile written twice, a read that no wait orders after its write) validate() must raise exactly the
message the rule alone raises, and a planted race must still be found on a small grouped schedule.
"""
from __future__ import annotations

import dataclasses

import pytest

from mkernel import Cluster, ScheduleError, Signal, Wait, Workload
from mkernel.builders import get
from mkernel.coverage import check_outputs
from mkernel.ir import BufferKind
from mkernel.signal_table import count_homes, signal_table
from mkernel import validation as V

W = Workload(m=512, n=1024, k=64, chunk_tiles=2, baseline_chunk_kib=64)


def _builds():
    c = Cluster("t", 2, 2)
    m = get("gemm_ar")
    return [m.build(W, c, grouped=True), m.build_baseline(W, c, grouped=True)]


def _with(s, t):
    return dataclasses.replace(s, tasks=s.tasks[:t.id] + (t,) + s.tasks[t.id + 1:])


def _grown(t, waits=(), signals=()):
    """``t`` with a wait or a signal more (that does not step, where its group's do)."""
    st = t.step
    if st is not None:
        st = dataclasses.replace(st, waits=st.waits + (0,) * len(waits) if st.waits else (),
                                 signals=st.signals + ((0, 0),) * len(signals) if st.signals else (),
                                 outer=st.outer + ((0, 0),) * len(signals) if st.outer else ())
    return dataclasses.replace(t, waits=t.waits + waits, signals=t.signals + signals, step=st)


def _message(rule) -> str | None:
    try:
        rule()
    except ScheduleError as e:
        return str(e)
    return None


def _keys(s):
    return signal_table(s, count_homes(s.world, s.gpus_per_node, s.first_nodes, s.local_fold))


@pytest.mark.parametrize("s", _builds(), ids=lambda s: s.variant)
def test_a_wait_counted_one_too_many_fails_as_the_signal_rule_alone_says(s):
    t = next(t for t in s.tasks if t.waits)
    w = t.waits[0]
    m = _with(s, dataclasses.replace(t, waits=(Wait(w.signal, w.count + 10_000),) + t.waits[1:]))
    alone = _message(lambda: V._check_signals(m, _keys(m)))
    assert alone is not None and "tasks bump it" in alone
    assert _message(lambda: m.validate(races=False)) == alone


@pytest.mark.parametrize("s", _builds()[:1], ids=lambda s: s.variant)
def test_a_cycle_closed_through_a_new_flag_fails_as_the_cycle_rule_alone_says(s):
    first = s.tasks[0]  # now waits on a flag that the last task of its queue bumps
    last = max((t for t in s.tasks if (t.rank, t.launch, t.role) == (first.rank, first.launch, first.role)),
               key=lambda t: t.id)
    flag = Signal(first.rank, "planted", 0)
    m = _with(s, _grown(first, waits=(Wait(flag, 1),)))
    m = _with(m, _grown(m.tasks[last.id], signals=(flag,)))
    alone = _message(lambda: V._check_cycles(m, _keys(m)))
    assert alone is not None and alone.startswith("dependency cycle")
    assert _message(lambda: m.validate(races=False)) == alone


def test_an_output_written_twice_fails_as_coverage_alone_says():
    s = _builds()[0]
    out = {b.name for b in s.buffers if b.kind is BufferKind.OUTPUT}
    t = next(t for t in s.tasks if t.writes and t.writes[0].buffer in out)
    extra = dataclasses.replace(t.member(0), id=len(s.tasks), signals=())  # its first member's write, once more
    m = dataclasses.replace(s, tasks=s.tasks + (extra,))
    alone = _message(lambda: check_outputs(m, {b.name: b for b in m.buffers}))
    assert alone is not None and "is written 2 times" in alone
    assert _message(lambda: m.validate(races=False)) == alone


def test_a_read_no_wait_orders_is_still_caught_as_a_race_on_a_small_grouped_schedule():
    s = _builds()[0]
    assert len(s.tasks) < sum(t.count for t in s.tasks) <= V.RACE_CHECK_MAX_TASKS  # groups, small enough
    s.validate()  # the build itself is race-free
    t = next(t for t in s.tasks if t.waits and t.reads and t.role.value == "intra")
    step = t.step and dataclasses.replace(t.step, waits=())
    m = _with(s, dataclasses.replace(t, waits=(), step=step))
    with pytest.raises(ScheduleError, match="race"):
        m.validate()
