"""GEMM+ReduceScatter's pushes on hw, on the CPU: the plans (the accumulating copy's column and op
set, what the kernel refuses), and the tables run by the interpreter (hw/lowering/interp.py) call
after call against the oracle, with the protocol's parts shown to matter. The GPU runs are in
tests/hw/test_hw_fused.py (``push``)."""
from __future__ import annotations

import dataclasses

import pytest
from harness.cases import interp_errors

from mkernel import builders
from mkernel.cluster import Cluster
from mkernel.errors import DeadlockError, ScheduleError
from mkernel.hw.lowering import interp, plan
from mkernel.hw.lowering.layout import COPY_ADD, OP_CODE, GemmTile, Task, Wait
from mkernel.ir import Op
from mkernel.problems import Workload

CLUSTERS = [(1, 2), (1, 4), (1, 8), (2, 2), (3, 2)]


def _push(c: Cluster, rows: int = 160, **changes) -> Workload:
    """Odd shapes: rows per rank not a multiple of the 128-row tile, n = 520 not of 256."""
    return Workload(kernel="gemm_rs", **{**dict(m=rows * c.world, n=520, k=72, node_reduce="push"), **changes})


@pytest.mark.parametrize("nodes,gpn", CLUSTERS)
def test_push_plans_mark_their_accumulating_copies_and_name_them_in_the_op_set(nodes, gpn):
    """Every accumulating COPY of the schedule, and only those, has layout.Task.ACCUMULATE set; the op
    set names them COPY_ADD and carries no plain copy (the copy out of a tile is a one-source reduce),
    and P, which peers add into, lives in the symmetric heap."""
    c = Cluster("t", nodes, gpn).with_sms(132 // (nodes * gpn))
    s = builders.get("gemm_rs").build(_push(c), c)
    for p in plan.build(s):
        mine = [s.tasks[i] for i in p.tasks[:, Task.TASK_ID]]
        assert p.tasks[:, Task.ACCUMULATE].tolist() == [int(t.accumulate) for t in mine]
        adds = p.tasks[p.tasks[:, Task.ACCUMULATE] == 1]
        assert len(adds) and (adds[:, Task.OP] == OP_CODE[Op.COPY]).all() and (adds[:, Task.NREADS] == 1).all()
        assert COPY_ADD in p.ops and "copy" not in p.ops and {"gemm", "reduce", "nop"} <= p.ops
        assert "P" in p.placement.heap


def test_the_gemm_table_keeps_each_destination_in_the_queue_order():
    """The table regroups tiles for L2 within a run of one signal rank and name: the own block first,
    then each destination's tiles, in the rotated order that spreads the pushes (rank r's blocks r,
    r + 1, ...); one run of local flags would have sorted every rank's tiles into block 0 first. On
    this shape (whole tiles) the whole compute queue is the table."""
    c = Cluster("t", 1, 4).with_sms(33)
    w = _push(c, rows=512, n=1024)
    for p in plan.build(builders.get("gemm_rs").build(w, c)):
        assert len(p.gemm_tiles) == p.role_tasks[0]
        blocks = [int(r) // (w.m // c.world) for r in p.gemm_tiles[:, GemmTile.C_ROW0]]
        firsts = [b for i, b in enumerate(blocks) if i == 0 or blocks[i - 1] != b]
        assert firsts == [(p.rank + d) % c.world for d in range(c.world)], (p.rank, firsts)


def test_what_the_kernel_cannot_add_is_refused_before_launch():
    """An accumulating copy of two region pairs, and an accumulating reduce: one clear error each."""
    c = Cluster("t", 1, 2).with_sms(66)
    s = builders.get("gemm_rs").build(_push(c), c)
    push = next(t for t in s.tasks if t.accumulate)
    two = dataclasses.replace(push, reads=push.reads * 2, writes=push.writes * 2)
    with pytest.raises(ScheduleError, match="adds 2 regions into their destinations; the kernel's accumulating copy"):
        plan.build(dataclasses.replace(s, tasks=tuple(two if t.id == push.id else t for t in s.tasks)))
    out = next(t for t in s.tasks if t.op is Op.REDUCE)
    adding = dataclasses.replace(out, accumulate=True)
    with pytest.raises(ScheduleError, match="on hw only attention merges and copies"):
        plan.build(dataclasses.replace(s, tasks=tuple(adding if t.id == out.id else t for t in s.tasks)))


@pytest.mark.parametrize("unordered", [False, True], ids=["rc", "srd"])
@pytest.mark.parametrize("nodes,gpn", CLUSTERS)
def test_the_push_tables_match_the_oracle_call_after_call(nodes, gpn, unordered):
    """Heap and scratch kept between calls, never zeroed: each call's accumulators start at the
    owner's base, whatever the last call left there."""
    c = Cluster("t", nodes, gpn).with_sms(132 // (nodes * gpn))
    assert max(interp_errors(_push(c), c, seed=nodes * 10 + gpn, unordered=unordered)) < 1e-5


def test_the_push_tables_under_the_ring_between_nodes():
    c = Cluster("t", 3, 2).with_sms(22)
    assert max(interp_errors(_push(c, rows=72, internode="ring", chunk_tiles=1), c, seed=4)) < 1e-5


def test_a_push_whose_arrival_signal_is_lost_deadlocks_its_owner():
    """Drop one push's bump of its owner's arrival flag from the tables: the owner's copy out of
    that tile waits for G - 1 pushes forever, and the interpreter names it."""
    c = Cluster("t", 1, 2).with_sms(66)
    m = interp.machine(builders.get("gemm_rs").build(_push(c), c))
    p = m.plans[1]
    row = next(r for r in p.tasks if r[Task.ACCUMULATE])
    row[Task.S1] = row[Task.S0]
    with pytest.raises(DeadlockError, match=r"tasks never ran, first rank 0 intra: .*'block 0 tile 0 out'"):
        interp_errors(_push(c), c, seed=1, m=m, calls=1)


def test_pushes_that_do_not_wait_for_the_base_are_overwritten_by_it():
    """Zero the count of every push's wait for its owner's base on rank 1 of 1 x 2: some seeded order
    lets a push add into the accumulator before the owner's GEMM stores its partial there, and the
    store wipes the peer's part out (or adds into the last call's sum)."""
    c = Cluster("t", 1, 2).with_sms(66)
    worst = 0.0
    for seed in range(6):
        m = interp.machine(builders.get("gemm_rs").build(_push(c), c))
        p = m.plans[1]
        for row in p.tasks[p.tasks[:, Task.ACCUMULATE] == 1]:
            p.waits[int(row[Task.W0]) + 1, Wait.COUNT] = 0  # (ready, base): the base
        worst = max(worst, *interp_errors(_push(c), c, seed=seed, m=m))
    assert worst > 1e-2
