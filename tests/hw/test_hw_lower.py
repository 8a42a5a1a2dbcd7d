"""Lowering a fused schedule to per-rank role tables (CPU): nothing lost, slots and epoch targets right."""
from __future__ import annotations

import numpy as np
import pytest
from harness.cases import SHAPES

from mkernel import Cluster, Workload
from mkernel.builders import get
from mkernel.errors import ScheduleError
from mkernel.hw.lowering import layout, lower
from mkernel.ir import Region

@pytest.fixture(params=sorted(SHAPES))
def fused(request, small_workload):
    kernel = request.param  # two tiles a chunk: several chunks per rank
    return get(kernel).build(small_workload(kernel, chunk_tiles=2), Cluster("t", 2, 2))


def test_every_task_is_lowered_once_in_queue_order_and_decodes_back(fused):
    tables = lower.lower(fused)
    queues = fused.queues()
    seen = 0
    for low in tables:
        for role, table in low.roles.items():
            queue = queues[(low.rank, 0, role)]
            assert len(table.tasks) == len(queue)
            for row, task in zip(table.tasks, queue):
                T, R, W, S = lower.QueueTask, lower.QueueRegion, layout.Wait, layout.Signal
                assert lower.OPS[row[T.OP]] is task.op and row[T.CHUNK] == task.chunk
                regions = [Region(low.buffers[r[R.BUFFER]], r[R.RANK], r[R.ROW0], r[R.ROW1], r[R.COL0], r[R.COL1])
                           for r in table.regions[row[T.R0]:row[T.R1]]]
                assert regions == list(task.reads + task.writes) and row[T.NREADS] == len(task.reads)
                assert [(low.slot_names[w[W.SLOT]], w[W.COUNT]) for w in table.waits[row[T.W0]:row[T.W1]]] == \
                    [(w.signal, w.count) for w in task.waits]
                assert [tables[sg[S.RANK]].slot_names[sg[S.SLOT]] for sg in table.signals[row[T.S0]:row[T.S1]]] == \
                    list(task.signals)
                seen += 1
    assert seen == len(fused.tasks)


def test_slots_count_the_bumps_each_call_delivers(fused):
    tables = lower.lower(fused)
    bumps = {}
    for task in fused.tasks:
        for sig in task.signals:
            bumps[sig] = bumps.get(sig, 0) + 1
    for low in tables:
        for slot, sig in enumerate(low.slot_names):
            assert low.slot_bumps[slot] == bumps.get(sig, 0)


def test_epoch_targets_over_three_calls_never_pass_on_stale_bumps(fused):
    """Replay three calls on running counters that are never reset, each call in a dependency order
    of the schedule: every wait's target is reached by the time its task runs, and was not yet
    reached by the bumps of earlier calls."""
    from mkernel.races import happens_before_graph, topological_order

    tables = lower.lower(fused)
    order = topological_order(happens_before_graph(fused))
    slot_of = lower.slots(fused)
    counters = [np.zeros(len(low.slot_bumps), dtype=np.int64) for low in tables]
    for epoch in (1, 2, 3):
        at_start = [c.copy() for c in counters]
        for n in order:
            if n >= len(fused.tasks):
                continue
            task = fused.tasks[n]
            for w in task.waits:
                slot, bumps = slot_of[w.signal], tables[task.rank].slot_bumps
                goal = lower.target(bumps, slot, w.count, epoch)
                assert counters[task.rank][slot] >= goal, f"{task.describe()} would hang in call {epoch}"
                assert at_start[task.rank][slot] < goal, f"{task.describe()} passes on call {epoch - 1}'s bumps"
            for sig in task.signals:
                counters[sig.rank][slot_of[sig]] += 1


def test_baselines_are_refused_with_the_reason():
    s = get("gemm_ar").build_baseline(Workload(m=256, n=256, k=32), Cluster("t", 2, 2))
    with pytest.raises(ScheduleError, match="has 2 launches; the hw backend lowers fused"):
        lower.lower(s)


def test_a_tile_order_change_reaches_the_tables_with_no_code_change():
    """The compute table follows the schedule's order: reversing the queue reverses the rows."""
    import dataclasses

    s = get("gemm_rs").build(Workload(kernel="gemm_rs", m=512, n=256, k=32), Cluster("t", 1, 2))
    compute = [t for t in s.tasks if t.rank == 0 and t.role.value == "compute"]
    others = [t for t in s.tasks if not (t.rank == 0 and t.role.value == "compute")]
    reordered = dataclasses.replace(s, tasks=tuple(dataclasses.replace(t, id=i) for i, t in
                                                   enumerate(compute[::-1] + others)))
    a = lower.lower(s)[0].roles[lower.Role.COMPUTE].regions
    b = lower.lower(reordered)[0].roles[lower.Role.COMPUTE].regions
    assert not np.array_equal(a, b) and sorted(map(tuple, a)) == sorted(map(tuple, b))


def test_every_flag_a_wait_can_time_out_on_has_a_name_and_the_barrier_names_its_peer():
    """A device wait's error names its flag (Executor.check). The call barrier's flags sit past the
    schedule's signals: on the emulated 2 x 2, GEMM+RS's flag 26 is the go flag, not an exit flag
    (2026-12-05: its timeout was first read as a lost exit SIGNAL), and an arrival names its peer."""
    from harness.cases import workload

    from mkernel.hw.lowering import plan

    p = plan.build(get("gemm_rs").build(workload("gemm_rs"), Cluster("hw", 2, 2).with_sms(33)), 0)[0]
    assert (p.n_flags, p.arrive0, p.exit0, p.go) == (28, 18, 22, 26)
    assert p.flag_name(26).startswith("call barrier: go")
    assert p.flag_name(20) == "call barrier: rank 2 entered this call"
    assert p.flag_name(25) == "call barrier: rank 3 finished the last call"
    assert p.flag_name(0).startswith("signal ") and p.flag_name(27) == "sink of data-only puts"
    assert all(p.flag_name(s) for s in range(p.n_flags)) and p.flag_name(p.n_flags) is None


@pytest.mark.parametrize("nodes,gpn", [(2, 2), (4, 1)])
def test_no_put_sets_a_call_barrier_flag(nodes, gpn):
    """A put's arrival flag set on a barrier slot would let a call barrier pass before the peer
    entered (or hide one that never did): every ring command of every case's plans sets a schedule
    or network flag below the barrier's, or the sink."""
    from harness.cases import CASES, workload
    from harness.mesh import call_commands

    from mkernel.hw.lowering import plan, ring

    for case in CASES:
        for p in plan.build(get(workload(case).kernel).build(workload(case), Cluster("hw", nodes, gpn).with_sms(33))):
            cmds = call_commands(p, 1)
            barrier = {c.chunk for c in cmds if c.type == ring.SIGNAL and c.chunk >= p.arrive0}
            data = {c.chunk for c in cmds} - barrier
            assert barrier <= set(range(p.arrive0, p.go)), (case, p.rank, barrier)
            assert all(f < p.arrive0 or f == p.sink for f in data), (case, p.rank, sorted(data))
