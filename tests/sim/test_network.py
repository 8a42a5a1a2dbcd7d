"""The network's proxy path as plain calls (sim/network.py, sim/proxy.py) against what it replaced.

The oracles: ``simpy.Resource`` for the host thread's grant order (:class:`~mkernel.sim.proxy.Host`);
SimPy processes started with ``env.start`` (URGENT events) for the messages a proxy step posts
(:meth:`~mkernel.sim.network.Network.posting`); :meth:`Task.member` for what the network reads of a
member through its group; and each transport's and notify mode's times, batches and waits as the
SimPy-process network computed them (commit 562f442: ring credits, the outstanding cap, fences, a
receiving proxy contended by its own posts, SRD flags and drops, a stalled proxy).
"""
from __future__ import annotations

import random
import pytest
import simpy

from mkernel import Cluster, NicSpec, Scenario, Workload, builders, run
from mkernel.cluster import ProxySpec
from mkernel.errors import TransportError
from mkernel.ir import MemberRef, Op, Region, Role, Signal, Step, Task, expand
from mkernel.sim.faults import Faults
from mkernel.sim.hazards import ArrivalTracker, NullTracker
from mkernel import ScheduleBuilder
from mkernel.sim.engine import Model
from mkernel.sim.network import Network
from mkernel.sim.proxy import Host
from mkernel.sim.environment import CountingEnvironment


def network(c: Cluster) -> Network:
    """The network of a run on ``c`` (of an empty schedule: the network reads the run's environment,
    cluster and faults)."""
    sb = ScheduleBuilder("t", "fused", world=c.world, gpus_per_node=c.gpus_per_node, num_sms=1)
    sb.launch("k", {Role.COMPUTE: 1})
    return Model(sb.build(0.0), c, None, track_hazards=False).net


def _script(seed: int) -> list[tuple[int, int, int]]:
    """Users (name, request time, hold) on a grid of 1 us, so requests, releases and holds tie."""
    rng = random.Random(seed)
    return [(u, rng.randrange(4), rng.randrange(3)) for u in range(rng.randrange(2, 7))]


def _with_resource(script) -> list[tuple]:
    env, log = CountingEnvironment(), []
    res = simpy.Resource(env, capacity=1)

    def user(u, at, hold):
        yield at
        req = res.request()
        yield req
        log.append((env.now, u, "got"))
        yield hold
        res.release(req)
        env.call_later(0.0, log.append, (env.now, u, "after"))

    for u, at, hold in script:
        env.start(user(u, at, hold))
    env.run()
    return log


def _with_host(script) -> list[tuple]:
    env, log = CountingEnvironment(), []
    host = Host(env)

    def release(u):
        host.release()
        env.call_later(0.0, log.append, (env.now, u, "after"))

    def got(u, hold):
        log.append((env.now, u, "got"))
        env.call_later(hold, release, u)

    def ask(arg):
        host.request(lambda hold: got(arg[0], hold), arg[1])

    for u, at, hold in script:  # each process's first step where it would run, then its wait
        env.call_first(lambda arg: env.call_later(arg[1], ask, (arg[0], arg[2])), (u, at, hold))
    env.run()
    return log


@pytest.mark.parametrize("seed", range(40))
def test_the_host_grants_as_simpy_resource_does(seed):
    """Who gets the thread, when, and where among the instant's other events (each release's own
    event, pushed right after it, shows where the grants it makes are processed)."""
    script = _script(seed)
    assert _with_host(script) == _with_resource(script)


def _posting_log(deferred: bool) -> tuple[list, int]:
    """A proxy step that posts two messages with an event of its own between them: each message's
    first step pushes one more event at this instant."""
    net, log = network(Cluster("t", 2, 1)), []
    env = net.env

    def first(name):
        def start(_arg):
            log.append(name)
            env.call_later(0.0, log.append, f"after {name}")
        return start

    def step(_arg):
        log.append("step")
        net._first(first("m1"))
        env.call_later(0.0, log.append, "the step's own")
        net._first(first("m2"))

    env.call_later(1.0, net.posting if deferred else step, (step, None) if deferred else None)
    env.run()
    return log, env.events


def test_messages_posted_by_a_proxy_step_start_where_their_processes_would():
    urgent, events = _posting_log(deferred=False)  # (outside a proxy step: each its own URGENT event)
    assert urgent == ["step", "m1", "m2", "the step's own", "after m1", "after m2"]
    deferred, fewer = _posting_log(deferred=True)
    assert deferred == urgent and fewer == events - 2


@pytest.mark.parametrize("kernel", ["gemm_ar", "gemm_rs", "ag_gemm", "moe_dispatch_gemm", "ring_attention",
                                    "gemm_ar 1024"])
def test_a_member_read_through_its_group_is_the_built_member(kernel, small_workload):
    """Every member of every group (the puts of a chunk's fan-out are groups in the larger GEMM+AR)."""
    w = Workload(kernel="gemm_ar", m=1024, n=1024, k=64) if kernel == "gemm_ar 1024" else small_workload(kernel)
    s = builders.get(w.kernel).build(w, Cluster("t", 2, 2), grouped=True)
    flat = expand(s)
    live, null = ArrivalTracker(s), NullTracker()
    assert any(t.op is Op.PUT and t.count > 1 for t in s.tasks) == (kernel == "gemm_ar 1024")
    uid = 0
    for t in s.tasks:
        for i in range(t.count):
            m = t.member(i)
            for k, r in enumerate(m.reads + m.writes):
                assert t.region_rank(k, i) == r.rank
            assert t.member_signals(i) == m.signals
            ref = live.member(t, i)
            if t.count > 1:
                assert isinstance(ref, MemberRef) and ref.build() == flat.tasks[uid]
                assert null.member(t, i).build() == t.member(i)
            else:
                assert ref == flat.tasks[uid]
            uid += 1


@pytest.mark.parametrize("rotate", [0, 1, 3])
def test_a_destination_read_through_its_group_follows_members_that_wrap(rotate):
    t = Task(0, 1, Role.SEND, Op.PUT, reads=(Region("X", 1, 0, 4, 0, 4),), writes=(Region("Y", 2, 0, 4, 0, 4),),
             signals=(Signal(2, "f", 0),), count=4, step=Step(((0, 0, 4), (1, 0, 4)), ((1, 1),), rotate=rotate))
    for i in range(4):
        m = t.member(i)
        assert (t.region_rank(0, i), t.region_rank(1, i)) == (m.reads[0].rank, m.writes[0].rank)
        assert t.member_signals(i) == m.signals
    assert [t.region_rank(1, i) for i in range(4)] == [2, 3, 4, 5][:4 - rotate] + [2 - rotate + j for j in range(rotate)]


TIGHT = ProxySpec(queue_depth=1, max_outstanding=1, batch=2)
# transport, notify, proxy, faults -> (fused s, batches, ring wait us, credit wait us, fence wait us), as the
# SimPy-process network computed them (562f442) for a 2 x 2 GEMM+AR 1024 x 1024 x 64 (16 puts)
RECORDED = {
    "ib_rc": (("ib_rc", "auto", ProxySpec(), None),
              (4.0648412444444443e-05, 4, 17.45921001564946, 0.0, 0.0)),
    "ib_rc, full ring and one write in flight": (("ib_rc", "auto", TIGHT, None),
                                                 (5.125866666666666e-05, 16, 148.09440751173707, 58.72960500782473, 0.0)),
    "ib_rc imm, the receiving proxy contended": (("ib_rc", "imm", ProxySpec(queue_depth=2, max_outstanding=2, batch=4),
                                                  None),
                                                 (4.358714666666666e-05, 8, 33.459210015649454, 6.7296050078247305, 0.0)),
    "ib_rc fence": (("ib_rc", "fence", ProxySpec(max_outstanding=2), None),
                    (5.0148412444444444e-05, 4, 17.45921001564946, 0.0, 59.94304000000001)),
    "ib_rc duplicates": (("ib_rc", "auto", TIGHT, Faults(seed=3, duplicate=0.7, reorder_us=4.0)),
                         (5.125866666666666e-05, 16, 148.09440751173707, 58.72960500782473, 0.0)),
    "efa_srd imm": (("efa_srd", "auto", ProxySpec(), None),
                    (4.5019306666666654e-05, 4, 17.45921001564946, 0.0, 0.0)),
    "efa_srd flags, drops": (("efa_srd", "flag", ProxySpec(), Faults(seed=6, drop=0.3, retransmit_us=20.0)),
                             (6.10800571535834e-05, 4, 17.45921001564946, 0.0, 0.0)),
    "ibgda": (("ibgda", "auto", ProxySpec(), None),
              (3.740721181846635e-05, 0, 0.0, 0.0, 0.0)),
    "ib_rc stalled proxy, slow poll": (("ib_rc", "auto", ProxySpec(poll_us=1.0, batch_window_us=3.0),
                                        Faults(stall_rank=0, stall_at_us=0.0, stall_us=40.0)),
                                       (7.514841244444446e-05, 4, 185.45921001564943, 0.0, 0.0)),
}


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_the_network_times_are_the_simpy_processes(name):
    (transport, notify, proxy, faults), want = RECORDED[name]
    c = Cluster("t", 2, 2, transport=transport, notify=notify, nic=NicSpec(srd_jitter_us=1.5), proxy=proxy)
    result, stats = run(Scenario("t", c, Workload(kernel="gemm_ar", m=1024, n=1024, k=64)), seed=5, faults=faults,
                        collapse=False)
    m = stats.metrics
    got = (result["time_s"], m["batches"], m["ring_wait_us"], m["credit_wait_us"], m["fence_wait_us"])
    assert got == pytest.approx(want, rel=1e-12)
    assert m["commands"] == (0 if transport == "ibgda" else 16) and m["fences"] == (m["batches"] if notify == "fence" else 0)


@pytest.mark.parametrize("hazards,uid", [(None, 212), (False, 73)])  # (73: each rank's tile rows one group each)
def test_a_put_lost_for_good_is_named_as_its_member(hazards, uid):
    """A group's member reaches the network unbuilt; the error names it as the built member: by its
    expanded id where hazards are tracked, by its group's id plus its index where not (as before)."""
    c = Cluster("t", 2, 2)
    f = Faults(seed=1, drop=1.0, retries=2, retransmit_us=5.0)
    with pytest.raises(TransportError, match=rf"^rank 1 -> rank 3: task {uid} \(put 'chunk 0 to node 1', rank 1, "
                                             r"role send\) was lost: 3 transmissions dropped .* at t=84\.3 us$"):
        run(Scenario("t", c, Workload(kernel="gemm_ar", m=1024, n=1024, k=64)), seed=5, faults=f, collapse=False,
            hazards=hazards)
