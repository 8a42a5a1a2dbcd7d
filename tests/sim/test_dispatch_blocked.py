"""The SMs' path for members that block (sim/dispatch.py): the runs a boundary forms, blocks and
releases, on a handmade launch whose every step is known.

One rank, four intra SMs and one compute SM. The intra queue: ``A``, four members each waiting on
its own counter (``s`` i: a wait that steps), then ``B``, four members waiting on one counter
(``t``: a wait that steps by 0), then ``C``, three members with a wait that does not step. The compute
SM's copies bump s0, s1 and s3, then s2 and t, then u. So: A's members block alone; three are
released at one instant (0 and 1 resume as one run, 3 apart: it does not follow them); B's
members taken at one boundary block as one run (one key); C 1 and 2, taken together, as one too.
:meth:`Dispatch._bulk` opens a lone blocked member's run without :meth:`Dispatch._join` (where the
last run waits on another key: A) and :meth:`Dispatch._resume` joins a released member to the part
before it without it (where it follows it): a fast path that broke either rule shows here
(checked by planting each: B's members as three runs; A's member 3 joined to 0 and 1).

``_bulk``'s loop written out for an entry off the compute role with one wait that steps (dx != 0)
is held to the general path on seeded launches whose takes mix ready and blocked members
(planted and caught: a lone ready member before a blocked one dropped, the last ready span dropped,
a blocked run's count off by one, a wait holding at its count taken as blocked).
"""
from __future__ import annotations

import random

import pytest

from mkernel import BufferKind, Cluster, DeadlockError, Op, Region, Role, ScheduleBuilder, Signal, Wait
from mkernel.ir import Step
from mkernel.sim.engine import Model
from mkernel.sim.signals import signal_of


def _schedule():
    sb = ScheduleBuilder("blocked", "fused", world=1, gpus_per_node=1, num_sms=8, grouped=True)
    sb.buffer("X", 64, 64, kind=BufferKind.INPUT)
    sb.buffer("Y", 64, 64)
    sb.launch("k", {Role.COMPUTE: 1, Role.INTRA: 4})
    for rows, bumps in ((0, ("s0", "s1", "s3")), (16, ("s2", "t0")), (32, ("u0",))):
        sb.add(0, Role.COMPUTE, Op.COPY, reads=(Region("X", 0, rows, rows + 16, 0, 64),),
               writes=(Region("Y", 0, rows, rows + 16, 0, 64),),
               signals=tuple(Signal(0, b[0], int(b[1:])) for b in bumps), label=f"copy{rows}")
    sb.add(0, Role.INTRA, Op.NOP, waits=(Wait(Signal(0, "s", 0), 1),), count=4, step=Step(waits=(1,)), label="A")
    sb.add(0, Role.INTRA, Op.NOP, waits=(Wait(Signal(0, "t", 0), 1),), count=4, step=Step(waits=(0,)), label="B")
    sb.add(0, Role.INTRA, Op.NOP, waits=(Wait(Signal(0, "u", 0), 1),), count=3, step=Step(label=(0, 1)),
           label="C")
    return sb.build(0.0)


def _logged(arrays: bool) -> tuple[list, list, Model]:
    """The runs each boundary formed (entry, first, members, wait) and each run's start (entry, first, members, time)."""
    model = Model(_schedule(), Cluster("1x1", nodes=1, gpus_per_node=1), None, arrays=arrays)
    taken, started = [], []
    go, work = model._go, model._work

    def logged_go(lane, runs):
        taken.append([(run.task.label, run.first, run.n, run.wait) for run in runs if run.role is Role.INTRA])
        go(lane, runs)

    def logged_work(run):
        if run.role is Role.INTRA:
            started.append((run.task.label, run.first, run.n, model.env.now))
        work(run)

    model._go, model._work = logged_go, logged_work
    model.run()
    return [t for t in taken if t], started, model


@pytest.mark.python_core
@pytest.mark.parametrize("arrays", [True, False])
def test_blocked_members_run_as_they_would_one_by_one(arrays):
    taken, started, model = _logged(arrays)
    assert taken == [
        [("A", 0, 1, 0), ("A", 1, 1, 0), ("A", 2, 1, 0), ("A", 3, 1, 0)],  # each on its own key
        [("B", 0, 2, 0)],  # the SMs of A 0 and 1: one key, one run
        [("B", 2, 1, 0)],  # A 3's
        [("B", 3, 1, -1)],  # A 2's, after t was bumped
        [("C", 0, 1, 0)],  # B 3's
        [("C", 1, 2, 0)]]  # two of B 0-2's (the third retires): a wait that does not step, one run
    t1, t2, t3 = 0.04096, 0.08192, 0.12288000000000002  # the copies' ends
    assert started == [("A", 0, 2, t1), ("A", 3, 1, t1),  # A 3 does not follow 0 and 1: a run of its own
                       ("A", 2, 1, t2), ("B", 3, 1, t2), ("B", 0, 3, t2),  # B 0-1 and 2 resume as one
                       ("C", 0, 3, t3)]
    assert not model.blocked() and all(n == 0 for n in model.pools[0].blocked.values())
    assert model.env.events == 9


@pytest.mark.python_core
def test_both_timer_paths_agree():
    a, b = _logged(True), _logged(False)
    assert a[:2] == b[:2] and a[2].env.events == b[2].env.events and a[2].finish == b[2].finish


def _general(make):
    """``Model._item`` whose Items never name a lone stepping wait (``Item.lone`` None): ``_bulk`` then
    takes every member through ``_waits_of``'s spans, its general path."""
    def item(task):
        made = make(task)
        made.lone = None
        return made
    return item


def _random_launch(seed: int, shared: bool = False):
    """Intra SMs taking entries of NOPs each waiting on its own counter (dx 1 or 2), bumped by compute
    copies of seeded sizes in a seeded order: a take's members are ready and blocked in turn. With
    ``shared``: entries of local copies too (their work scheduled, not done at once as a NOP's),
    entries that wait on one name, so counters have several waiters, and a NOP first on the compute
    role that bumps one counter as the first boundary's runs start (a member taken blocked on it
    there must find it bumped when it would wait)."""
    rng = random.Random(seed)
    sb = ScheduleBuilder("lone", "fused", world=1, gpus_per_node=1, num_sms=16, grouped=True)
    sb.buffer("X", 256, 64, kind=BufferKind.INPUT)
    sb.buffer("Y", 256, 64)
    sb.buffer("Z", 256, 64)
    sb.launch("k", {Role.COMPUTE: rng.randint(1, 2), Role.INTRA: rng.randint(2, 5)})
    keys = set()
    for e in range(rng.randint(1, 3) + 2 * shared):
        count, dx = rng.randint(3, 12), rng.randint(1, 2)
        name, at = (f"s{e}", 1) if not shared else ("s", rng.randint(0, 4))
        kind = dict(op=Op.NOP, step=Step(waits=(dx,)))
        if shared and rng.random() < 0.7:  # (a copy of one row of Y into Z a member: Z's rows are written once)
            kind = dict(op=Op.COPY, reads=(Region("Y", 0, e * 24, e * 24 + 1, 0, 64),),
                        writes=(Region("Z", 0, e * 24, e * 24 + 1, 0, 64),),
                        step=Step(waits=(dx,), regions=((0, 1, 0), (0, 1, 0))))
        sb.add(0, Role.INTRA, waits=(Wait(Signal(0, name, at), 1),), count=count, label=f"D{e}", **kind)
        keys |= {(name, at + i * dx) for i in range(count)}
    keys = sorted(keys)
    rng.shuffle(keys)
    if shared:  # (a NOP first on the compute role, its bump made as it is taken: an intra member taken at that
        # boundary, blocked on the key, must find it bumped when it would wait)
        sb.add(0, Role.COMPUTE, Op.NOP, signals=(Signal(0, *keys[-1]),), label="kick")
    row = 0
    while keys:
        k = rng.randint(1, 4)
        bumps, keys = keys[:k], keys[k:]
        rows = rng.randint(1, 8)
        sb.add(0, Role.COMPUTE, Op.COPY, reads=(Region("X", 0, row, row + rows, 0, 64),),
               writes=(Region("Y", 0, row, row + rows, 0, 64),), signals=tuple(Signal(0, n, i) for n, i in bumps),
               label=f"copy{row}")
        row = (row + rows) % 240
    return sb.build(0.0)


def _run(s, general: bool) -> tuple[tuple, list]:
    """What the run did (each run's start, the event count, the ranks' ends) and the spans of each
    take ``_waits_of`` listed: (entry, spans)."""
    model = Model(s, Cluster("1x1", nodes=1, gpus_per_node=1), None)
    if general:
        model._item = _general(model._item)
    waits_of, work, started, takes = model._waits_of, model._work, [], []

    def listed(item, first, n):
        spans = waits_of(item, first, n)
        takes.append((item.task.label, spans))
        return spans

    def logged(run):
        started.append((run.task.label, run.first, run.n, model.env.now))
        work(run)

    model._waits_of, model._work = listed, logged
    model.run()
    return (started, model.env.events, model.finish), takes


@pytest.mark.python_core
@pytest.mark.parametrize("shared", [False, True])
def test_lone_waits_fast_path_is_the_general_path(shared):
    fast_takes = mixed = 0
    for seed in range(40):
        s = _random_launch(seed, shared)
        (fast, listed), (general, takes) = _run(s, False), _run(s, True)
        assert fast == general, seed
        assert not listed  # the fast path took every take, an entry's first included
        fast_takes += len(takes)
        mixed += sum(any(w >= 0 for _, _, (w, _, _) in spans) and any(w < 0 for _, _, (w, _, _) in spans)
                     for _, spans in takes)
    assert fast_takes and mixed  # takes of ready and blocked members in turn went through it


def test_deadlock_lists_waiters_in_the_order_they_last_began_to_wait():
    """``Model.blocked`` reads the waiters off the board, ordered by their latest wait: D blocks on
    a[0] before E blocks on w[0]; a[0]'s bump releases D, which then waits on v[0]. Neither v nor w is
    ever bumped: E is listed before D (with D listed by its first wait, a run re-blocked would keep its
    old place: caught by planting it)."""
    sb = ScheduleBuilder("stuck", "fused", world=1, gpus_per_node=1, num_sms=8, grouped=True)
    sb.buffer("X", 64, 64, kind=BufferKind.INPUT)
    sb.buffer("Y", 64, 64)
    sb.launch("k", {Role.COMPUTE: 1, Role.INTRA: 2})
    sb.add(0, Role.COMPUTE, Op.COPY, reads=(Region("X", 0, 0, 16, 0, 64),), writes=(Region("Y", 0, 0, 16, 0, 64),),
           signals=(Signal(0, "a", 0),), label="copy")
    sb.add(0, Role.INTRA, Op.NOP, waits=(Wait(Signal(0, "a", 0), 1), Wait(Signal(0, "v", 0), 1)), label="D")
    sb.add(0, Role.INTRA, Op.NOP, waits=(Wait(Signal(0, "w", 0), 1),), label="E")
    model = Model(sb.build(0.0), Cluster("1x1", nodes=1, gpus_per_node=1), None)
    with pytest.raises(DeadlockError, match=r"(?s)'E'.*waits for w\[0\]@0 >= 1.*'D'.*waits for v\[0\]@0 >= 1"):
        model.run()
    assert [(run.task.label, signal_of(run.key)) for run in model.blocked()] == [("E", Signal(0, "w", 0)),
                                                                                 ("D", Signal(0, "v", 0))]


def test_a_controller_sees_the_blocked_sms_counted():
    """With a controller (which reads ``RolePool.blocked``), each run that waits on the board counts
    its SMs in until it is released (the launch above: A's and B's members), and a run found ready
    when it would wait never counts: M, taken blocked on k[0] beside N, which bumps k[0] as it starts
    (a NOP ends at once). Planted: every resumed run counted out; the count went below 0."""
    sb = ScheduleBuilder("found", "fused", world=1, gpus_per_node=1, num_sms=8, grouped=True)
    sb.launch("k", {Role.COMPUTE: 1, Role.INTRA: 2})
    sb.add(0, Role.INTRA, Op.NOP, signals=(Signal(0, "k", 0),), label="N")
    sb.add(0, Role.INTRA, Op.NOP, waits=(Wait(Signal(0, "k", 0), 1),), label="M")
    for schedule in (_schedule(), sb.build(0.0)):
        seen = []
        model = Model(schedule, Cluster("1x1", nodes=1, gpus_per_node=1), None,
                      controller=lambda rank, pool, now: seen.append(pool.blocked[Role.INTRA]))
        model.run()
        assert min(seen) == 0 and all(n == 0 for n in model.pools[0].blocked.values())
        assert max(seen) > 0 or schedule.kernel == "found"


class _FreshItems(Model):
    """The model with every take on the SM-by-SM path (``Dispatch._take``) making its entry's record
    anew, where the path keeps the one its queue made at the entry's first member."""

    def _take(self, lane, runs, slot, role, task, i):
        lane.pool.roles[role].item = None
        super()._take(lane, runs, slot, role, task, i)


@pytest.mark.python_core
@pytest.mark.parametrize("how", ["controller", "trace"])
def test_the_sm_by_sm_path_keeps_an_entrys_record_as_one_made_per_take_would(how):
    """With a controller or a trace the SMs take members one by one (``Dispatch._pass``), reading the
    record (``sms.Item``) their queue made at the entry's first member. Each take's own record must give
    the same run: the same end per rank, event count, hazards and spans, on GEMM+AR, GEMM+RS and ring
    attention builds with blocked members. (Planted: a queue's record kept for the next entry's first
    member too; caught.)"""
    from mkernel import Workload
    from mkernel.builders import get

    c = Cluster("t", 2, 2, transport="ib_rc")
    for kernel, w in (("gemm_ar", Workload(m=576, n=1024, k=64, chunk_tiles=2)),
                      ("gemm_rs", Workload(kernel="gemm_rs", m=512, n=512, k=64)),
                      ("ring_attention", Workload(kernel="ring_attention", m=256, n=64, k=64))):
        s = get(kernel).build(w, c, grouped=True)
        got = []
        for cls in (Model, _FreshItems):
            spans: list = []
            kw = ({"controller": lambda rank, pool, now: spans.append((rank, now, dict(pool.target)))}
                  if how == "controller" else {"trace": True})
            model = cls(s, c, None, **kw)
            model.run()
            got.append((model.finish, model.env.events, model.tracker.hazards, spans or model.spans))
        assert got[0] == got[1], kernel
        assert got[0][1] > 0 and got[0][3]
