"""``ScheduleBuilder.add_group`` and ``appender`` (the hot loops' positional adds) make what ``add`` makes.

Every task of a finished GEMM+AR build that add_group can take (no chunk, mask or index, not
accumulating) is added again, once through ``add``, once through ``add_group`` and once through an
``appender`` of its rank, role, op and label, into builders of each kind (grouped or flat, first
nodes, local rank 0 with GEMM+AR's renaming declarations, a timing build's library launch): all
must end with the same tasks, and refuse the same ones.
"""
from __future__ import annotations

import pytest

from mkernel import Cluster, Workload, builders
from mkernel.ir import Library, Role
from mkernel.schedule_builder import ScheduleBuilder

W = Workload(m=512, n=1024, k=64, chunk_tiles=2)
C = Cluster("t", 2, 4)


def _replay(kw: dict, via: str) -> list:
    s = builders.get("gemm_ar").build(W, C, grouped=True)
    library = kw.pop("library", None)
    sb = ScheduleBuilder(s.kernel, s.variant, s.world, s.gpus_per_node, s.num_sms, rotating={"contrib": 1, "pushed": 1},
                         fixed=("out_done", "base"), **kw)
    sb.launch("fused", {Role.COMPUTE: 1}, library)
    out = []
    for t in s.tasks:
        if t.chunk != -1 or t.mask or t.index or t.accumulate:
            continue
        try:
            if via == "add_group":
                sb.add_group(t.rank, t.role, t.op, t.reads, t.writes, t.waits, t.signals, t.label, t.count, t.step)
            elif via == "appender":  # (one per task: the appender of each kind of task makes the same)
                sb.appender(t.rank, t.role, t.op, t.label)(t.reads, t.writes, t.waits, t.signals, t.count, t.step)
            else:
                sb.add(t.rank, t.role, t.op, reads=t.reads, writes=t.writes, waits=t.waits, signals=t.signals,
                       label=t.label, count=t.count, step=t.step)
        except ValueError as e:
            out.append(str(e))
    return out + [repr(t) for t in sb.tasks]


@pytest.mark.parametrize("kw", [{"grouped": True}, {"grouped": False}, {"grouped": True, "first_nodes": 1},
                                {"grouped": True, "first_nodes": 1, "local_fold": True},
                                {"grouped": True, "library_tasks": False, "library": Library("all_reduce", 1)}],
                         ids=["grouped", "flat", "first-node", "local", "library"])
@pytest.mark.parametrize("via", ["add_group", "appender"])
def test_the_hot_adds_make_what_add_makes(kw, via):
    want = _replay(dict(kw), "add")
    assert _replay(dict(kw), via) == want
    # (a library launch of a timing build keeps none: every other keeps tasks)
    assert [x for x in want if x.startswith("Task(")] if "library" not in kw else not want


def test_an_appender_used_after_the_next_launch_opens_adds_as_add_group_would():
    """(Planted and caught: the launch not checked at each call, the task kept with the first launch's index.)"""
    s = builders.get("gemm_ar").build(W, C, grouped=True)
    t = next(t for t in s.tasks if t.count > 1 and t.step is not None and t.chunk == -1 and not (t.mask or t.index
                                                                                                 or t.accumulate))
    made = []
    for via in ("add_group", "appender"):
        sb = ScheduleBuilder(s.kernel, s.variant, s.world, s.gpus_per_node, s.num_sms, grouped=True)
        sb.launch("first", {Role.COMPUTE: 1})
        add = sb.appender(t.rank, t.role, t.op, t.label)
        sb.launch("second", {Role.COMPUTE: 1})
        if via == "add_group":
            sb.add_group(t.rank, t.role, t.op, t.reads, t.writes, t.waits, t.signals, t.label, t.count, t.step)
        else:
            add(t.reads, t.writes, t.waits, t.signals, t.count, t.step)
        made.append(sb.tasks)
    assert made[0] == made[1] and [x.launch for x in made[1]] == [1]
