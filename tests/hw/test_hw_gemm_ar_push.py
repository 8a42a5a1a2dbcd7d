"""GEMM+AllReduce's pushes on hw, on the CPU: the plans (the accumulating copies beside the broadcast's
plain copies, the op set) and the tables run by the interpreter (hw/lowering/interp.py) call after
call against the oracle, under each inter-node algorithm, with the protocol's parts shown to matter.
The GPU runs are in tests/hw/test_hw_fused.py (``ar_push``)."""
from __future__ import annotations

import pytest
from harness.cases import interp_errors

from mkernel import builders
from mkernel.cluster import Cluster
from mkernel.errors import DeadlockError
from mkernel.hw.lowering import interp, plan
from mkernel.hw.lowering.layout import COPY_ADD, OP_CODE, GemmTile, Task, Wait
from mkernel.ir import Op
from mkernel.problems import Workload

CLUSTERS = [(1, 2), (1, 4), (1, 8), (2, 2), (3, 2)]


def _push(**changes) -> Workload:
    """Odd shapes: m = 300 not a multiple of the 128-row tile, n = 520 not of 256; chunks of one slot."""
    return Workload(kernel="gemm_ar", **{**dict(m=300, n=520, k=72, chunk_tiles=1, node_reduce="push"), **changes})


def _cluster(nodes: int, gpn: int) -> Cluster:
    return Cluster("t", nodes, gpn).with_sms(132 // (nodes * gpn))


@pytest.mark.parametrize("nodes,gpn", CLUSTERS)
def test_push_plans_mark_their_accumulating_copies_beside_the_broadcasts(nodes, gpn):
    """Every accumulating COPY, and only those, has layout.Task.ACCUMULATE set, one region pair each;
    the broadcasts are plain copies (one pair per peer); the op set names both (COPY_ADD and copy), P,
    which peers add into, and OUT, which the owner broadcasts into, live in the symmetric heap; the
    whole compute queue but its drain is the GEMM table, slot by slot in the queue's order with the own
    tile first in each (the table regroups only the peers' tiles of a slot, one run of ``ready`` flags),
    so each chunk's base is stored as early as in the queue."""
    c = _cluster(nodes, gpn)
    s = builders.get("gemm_ar").build(_push(), c)
    for p in plan.build(s):
        mine = [s.tasks[i] for i in p.tasks[:, Task.TASK_ID]]
        assert p.tasks[:, Task.ACCUMULATE].tolist() == [int(t.accumulate) for t in mine]
        adds = p.tasks[p.tasks[:, Task.ACCUMULATE] == 1]
        assert len(adds) and (adds[:, Task.OP] == OP_CODE[Op.COPY]).all() and (adds[:, Task.NREADS] == 1).all()
        copies = p.tasks[(p.tasks[:, Task.OP] == OP_CODE[Op.COPY]) & (p.tasks[:, Task.ACCUMULATE] == 0)]
        assert len(copies) and (copies[:, Task.NREADS] >= 1).all()
        assert {COPY_ADD, "copy", "gemm", "reduce", "nop"} <= p.ops and ("put" in p.ops) == (nodes > 1)
        assert {"P", "OUT"} <= set(p.placement.heap)
        gemms = [t for t in s.tasks if t.rank == p.rank and t.op is Op.GEMM]
        assert len(p.gemm_tiles) == len(gemms) == p.role_tasks[0] - 1
        cols = -(-s.buffers[[b.name for b in s.buffers].index("P")].cols // 256)
        index = [r // 128 * cols + col // 256 for r, col in p.gemm_tiles[:, [GemmTile.C_ROW0, GemmTile.C_COL0]].tolist()]
        assert [i // gpn for i in index] == [(t.writes[0].row0 // 128 * cols + t.writes[0].col0 // 256) // gpn for t in gemms]
        slots = [[i for i in index if i // gpn == slot] for slot in dict.fromkeys(i // gpn for i in index)]
        assert all(slot[0] % gpn == p.rank % gpn for slot in slots if any(i % gpn == p.rank % gpn for i in slot))


@pytest.mark.parametrize("nodes,gpn,unordered", [(1, 2, False), (1, 2, True), (1, 4, True), (1, 8, False), (2, 2, False),
                                                  (2, 2, True), (3, 2, True)])
def test_the_push_tables_match_the_oracle_call_after_call(nodes, gpn, unordered):
    """Heap and scratch kept between calls, never zeroed: each call's accumulators start at the
    owner's base, whatever the last call left there."""
    c = _cluster(nodes, gpn)
    assert max(interp_errors(_push(), c, seed=nodes * 10 + gpn, unordered=unordered)) < 1e-5


@pytest.mark.parametrize("internode,shape", [("ring", (520, 1000, 1)), ("twoshot", (520, 1000, 1)),
                                             ("twoshot", (300, 520, 3))], ids=["ring", "twoshot", "twoshot-shared"])
def test_the_push_tables_under_each_algorithm_between_nodes(internode, shape):
    c = _cluster(3, 2)
    m, n, chunk_tiles = shape
    assert max(interp_errors(_push(m=m, n=n, chunk_tiles=chunk_tiles, internode=internode), c, seed=4)) < 1e-5


def test_a_push_whose_arrival_signal_is_lost_deadlocks_its_owner():
    """Drop one push's bump of its owner's arrival flag from the tables: the owner's copy out of
    that tile waits for G - 1 pushes forever, so do its broadcast and the owner's drain, and the
    interpreter names the first task of the owner's that never ran."""
    c = _cluster(1, 2)
    m = interp.machine(builders.get("gemm_ar").build(_push(), c))
    p = m.plans[1]
    row = next(r for r in p.tasks if r[Task.ACCUMULATE])
    row[Task.S1] = row[Task.S0]
    with pytest.raises(DeadlockError, match=r"gemm_ar call 1: 4 tasks never ran, first rank 0 compute: .*'drain'"):
        interp_errors(_push(), c, seed=1, m=m, calls=1)


def test_pushes_that_do_not_wait_for_the_base_are_overwritten_by_it():
    """Zero the count of every push's wait for its owner's base on rank 1 of 1 x 2: some seeded order
    lets a push add into the accumulator before the owner's GEMM stores its partial there, and the
    store wipes the peer's part out (or the push adds into the last call's sum)."""
    c = _cluster(1, 2)
    worst = 0.0
    for seed in range(6):
        m = interp.machine(builders.get("gemm_ar").build(_push(), c))
        p = m.plans[1]
        for row in p.tasks[p.tasks[:, Task.ACCUMULATE] == 1]:
            p.waits[int(row[Task.W0]) + 1, Wait.COUNT] = 0  # (ready, base): the base
        worst = max(worst, *interp_errors(_push(), c, seed=seed, m=m))
    assert worst > 1e-2
