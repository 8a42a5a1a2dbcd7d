"""``ScheduleBuilder.add_group`` (the hot loops' positional add) makes what ``add`` makes.

Every task of a finished GEMM+AR build that add_group can take (no chunk, mask or index, not
accumulating) is added again, once through ``add`` and once through ``add_group``, into builders of
each kind (grouped or flat, first nodes, local rank 0 with GEMM+AR's renaming declarations): both
must end with the same tasks, and refuse the same ones.
"""
from __future__ import annotations

import pytest

from mkernel import Cluster, Workload, builders
from mkernel.ir import Role
from mkernel.schedule_builder import ScheduleBuilder

W = Workload(m=512, n=1024, k=64, chunk_tiles=2)
C = Cluster("t", 2, 4)


def _replay(kw: dict, via_group: bool) -> list:
    s = builders.get("gemm_ar").build(W, C, grouped=True)
    sb = ScheduleBuilder(s.kernel, s.variant, s.world, s.gpus_per_node, s.num_sms, rotating={"contrib": 1, "pushed": 1},
                         fixed=("out_done", "base"), **kw)
    sb.launch("fused", {Role.COMPUTE: 1})
    out = []
    for t in s.tasks:
        if t.chunk != -1 or t.mask or t.index or t.accumulate:
            continue
        try:
            if via_group:
                sb.add_group(t.rank, t.role, t.op, t.reads, t.writes, t.waits, t.signals, t.label, t.count, t.step)
            else:
                sb.add(t.rank, t.role, t.op, reads=t.reads, writes=t.writes, waits=t.waits, signals=t.signals,
                       label=t.label, count=t.count, step=t.step)
        except ValueError as e:
            out.append(str(e))
    return out + [repr(t) for t in sb.tasks]


@pytest.mark.parametrize("kw", [{"grouped": True}, {"grouped": False}, {"grouped": True, "first_nodes": 1},
                                {"grouped": True, "first_nodes": 1, "local_fold": True}],
                         ids=["grouped", "flat", "first-node", "local"])
def test_add_group_makes_what_add_makes(kw):
    assert _replay(kw, True) == _replay(kw, False)
