"""backend._fits, the screen that a region table handed to the simulator is its schedule's: one record
per region, the last record's entry the last task with regions (sought from the end)."""
from __future__ import annotations

import dataclasses

from mkernel import Cluster, Workload, builders
from mkernel.ir import Op, Role, Task
from mkernel.members import read_regions
from mkernel.sim.backend import _fits

W = Workload(m=512, n=1024, k=64, chunk_tiles=2)


def test_a_schedules_own_table_fits_and_anothers_does_not():
    s = builders.get("gemm_ar").build(W, Cluster("t", 2, 4), grouped=True)
    assert s.tasks[-1].op is Op.NOP and not s.tasks[-1].reads + s.tasks[-1].writes  # (drains last: no regions)
    table = read_regions(s)
    assert _fits(table, s)
    other = builders.get("gemm_ar").build(dataclasses.replace(W, m=1024), Cluster("t", 2, 4), grouped=True)
    assert not _fits(read_regions(other), s) and not _fits(table, other)


def test_the_last_record_must_be_the_last_task_with_regions():
    s = builders.get("gemm_ar").build(W, Cluster("t", 2, 4), grouped=True)
    table = read_regions(s)
    last = max(i for i, t in enumerate(s.tasks) if t.reads + t.writes)
    recs, fields, codes = table
    moved = dict(fields, entry=fields["entry"].copy())
    moved["entry"][-1] = last - 1  # (as many records, the last one's entry another task's)
    assert not _fits((recs, moved, codes), s)
    nop = Task(len(s.tasks), 0, Role.COMPUTE, Op.NOP)
    assert _fits(table, dataclasses.replace(s, tasks=s.tasks + (nop,)))  # (a task with no regions after: still fits)


def test_a_schedule_without_regions_fits_an_empty_table():
    s = builders.get("gemm_ar").build(W, Cluster("t", 2, 4), grouped=True)
    bare = dataclasses.replace(s, tasks=tuple(Task(i, 0, Role.COMPUTE, Op.NOP) for i in range(3)))
    recs, fields, codes = read_regions(bare)
    assert len(recs) == 0 and _fits((recs, fields, codes), bare)
