"""The SimPy model of one schedule on one cluster.

Each rank runs its launches in stream order. In a launch, every SM is a process that serves one
role of a :class:`~mkernel.sim.sms.RolePool` at a time, taking that role's tasks in queue order;
it waits for the task's signals, then spends the task's cost. An optional controller may move SMs
between roles at task boundaries. Costs:

- GEMM: :func:`cost.gemm_us` on the SM (a roofline with a tile-size efficiency; faster per SM while
  fewer of the rank's SMs compute).
- COPY/REDUCE/GATHER: the SM streams its local bytes at ``sm_stream_gb_per_s`` while it drives one flow
  per peer region over the NVLink ports (source egress, destination ingress), capped together by
  what one SM can copy over NVLink (``sm_copy_gb_per_s``); then the NVLink latency.
- PUT: handed to :class:`~mkernel.sim.network.Network` (ring, proxy, NIC, transport).

Every task's reads are checked for bytes that have not arrived (:mod:`mkernel.sim.hazards`) when
it starts; its writes count as arrived when it ends (a PUT's when the data lands).

``stress`` (for hazard hunting, not timing) scales every GEMM, NVLink latency and SM start by a
seeded random factor, so races that a bug allows get a chance to show.

Signals are epoch-stamped counters. A flag stored to a peer lands one NVLink latency after it is
issued, unless the task already waited that latency for its own peer stores. If the event queue
drains while workers still wait, :class:`DeadlockError` lists every waiter.
"""
from __future__ import annotations

import math
import random

from mkernel.cluster import Cluster
from mkernel.errors import DeadlockError
from mkernel.ir import Op, Role, Schedule, Signal, Task

from . import cost
from .data import DataStore
from .faults import Faults, Injector
from .flows import FlowNet, Link
from .hazards import ArrivalTracker, NullTracker
from .library import LibraryCalls
from .network import Network
from .signals import CountingEnvironment, SignalBoard
from .sms import RolePool


class Model:
    """Everything one simulated run owns: the environment, ports, network, signals and metrics."""

    def __init__(self, s: Schedule, c: Cluster, data: DataStore | None, *, epoch: int = 1, seed: int = 0,
                 trace: bool = False, stress: float = 0.0, track_hazards: bool = True,
                 controller=None, faults: Faults | None = None) -> None:
        self.s, self.c, self.data = s, c.for_variant(s.variant), data
        c = self.c
        self.env = CountingEnvironment()
        self.flows = FlowNet(self.env, record=trace)
        self.board = SignalBoard(self.env, epoch)
        self.tracker = ArrivalTracker(s) if track_hazards else NullTracker()
        self.itemsize = {b.name: b.itemsize for b in s.buffers}
        self.stress = stress
        self.stress_rng = random.Random(seed ^ 0x5EED)
        self.inject = Injector(faults)
        nv = cost.bytes_per_us(c.nvlink.bw_gb_per_s)
        self.nv_out = [Link("nvlink.out", nv) for _ in range(s.world)]
        self.nv_in = [Link("nvlink.in", nv) for _ in range(s.world)]
        self.net = Network(self, seed)
        self.library = LibraryCalls(self)  # baseline launches that stand for a library call
        self.sm_copy = cost.bytes_per_us(c.sm_copy_gb_per_s)
        self.sm_stream = cost.bytes_per_us(c.gpu.sm_stream_gb_per_s)
        self.finish = [math.nan] * s.world
        self.net_bytes = [0.0] * s.world
        self.host_bytes = [0.0] * s.world
        self.compute_busy = [0.0] * s.world  # union of time with at least one compute task running
        self._computing = [0] * s.world
        self._compute_since = [0.0] * s.world
        self.blocked: dict = {}
        self.controller = controller  # called as controller(rank, pool, now_us) at task boundaries
        self.pools: dict[int, RolePool] = {}
        self.spans: list[tuple] | None = [] if trace else None
        self.proxy_spans: list[tuple] = []
        self.queues = s.queues()

    # -- running -------------------------------------------------------------------------------
    def run(self) -> None:
        for rank in range(self.s.world):
            self.env.process(self._rank(rank))
        self.env.run()
        if self.blocked:
            lines = [f"rank {t.rank} role {t.role.value} {t.describe()} waits for {sig} >= {need}, "
                     f"has {self.board.count(sig)}" for t, sig, need in self.blocked.values()]
            injected = self.inject.report()
            raise DeadlockError(f"deadlock at t={self.env.now:.3f} us in epoch {self.board.epoch}: "
                                f"{len(lines)} tasks wait on signals nothing will bump"
                                + (f" ({injected})" if injected else "") + ":\n  " + "\n  ".join(lines))

    def _rank(self, rank: int):
        for li, launch in enumerate(self.s.launches):
            if li > 0:
                yield self.env.timeout(self.c.launch_us)
            if launch.library is not None and self.data is None:  # timed as the call (sim/library.py)
                yield from self.library.enter(rank, li, launch.library)
                continue
            if self.c.gpu.fused_call_us:  # entry and exit of the fused kernel, paid once per call
                yield self.env.timeout(self.c.gpu.fused_call_us)
            queues = {role: self.queues.get((rank, li, role), []) for role, _ in launch.sms}
            work = (lambda t: cost.sm_work_us(t, self.itemsize, self.c)) if self.controller else None
            pool = RolePool(dict(launch.sms), queues, work)
            self.pools[rank] = pool
            if self.controller is not None:  # the initial split is the controller's too
                self.controller(rank, pool, self.env.now)
            workers = [self.env.process(self._sm(rank, slot, role, pool))
                       for slot, role in enumerate(pool.initial_roles())]
            yield self.env.all_of(workers)
        self.finish[rank] = self.env.now
        self.tracker.check_outputs_landed(rank, self.env.now)

    def _sm(self, rank: int, slot: int, role: Role, pool: RolePool):
        """One SM: take tasks of its role; at each task boundary follow the pool's targets."""
        key = (rank, slot)
        while True:
            picked = pool.next_task(role)
            if picked is None:
                return
            role, task = picked
            for wait in task.waits:
                event = self.board.wait(wait.signal, wait.count)
                if event is not None:
                    self.blocked[key] = (task, wait.signal, wait.count)
                    pool.blocked[role] += 1
                    yield event
                    pool.blocked[role] -= 1
                    del self.blocked[key]
            if self.stress > 0:
                yield self.env.timeout(self._stretch(1.0))  # a stressed SM starts up to 1+stress us late
            start = self.env.now
            if role is Role.COMPUTE:
                self._compute_edge(rank, +1)
            yield from self._execute(task)
            if role is Role.COMPUTE:
                if self.c.gpu.fused_tile_us and task.op in (Op.GEMM, Op.ATTN):  # fill, epilogue, task row
                    yield self.env.timeout(self.c.gpu.fused_tile_us)
                self._compute_edge(rank, -1)
            if self.spans is not None:
                self.spans.append((rank, role.value, slot, task.label or task.op.value, start, self.env.now))
            pool.active[role] -= 1
            if self.controller is not None:
                self.controller(rank, pool, self.env.now)

    def _compute_edge(self, rank: int, step: int) -> None:
        if step > 0 and self._computing[rank] == 0:
            self._compute_since[rank] = self.env.now
        self._computing[rank] += step
        if step < 0 and self._computing[rank] == 0:
            self.compute_busy[rank] += self.env.now - self._compute_since[rank]

    # -- task effects --------------------------------------------------------------------------
    def _execute(self, task: Task):
        if task.op is Op.PUT:
            sources = self.data.snapshot(task) if self.data is not None else None
            yield from self.net.send(task, sources)
            return
        self.tracker.check_reads(task, self.env.now)
        slow = self.inject.slowdown(task.rank)
        busy = self._computing[task.rank]  # compute SMs running now, this one included
        if task.op is Op.GEMM:
            yield self.env.timeout(self._stretch(cost.gemm_us(task, self.itemsize, self.c, busy)) * slow)
        elif task.op is Op.ATTN:
            yield self.env.timeout(self._stretch(cost.attn_us(task, self.itemsize, self.c)) * slow)
        elif task.op is Op.NORM:
            yield self.env.timeout(cost.local_bytes(task, self.itemsize) / self.sm_stream * slow)
        elif task.op in (Op.COPY, Op.REDUCE, Op.GATHER):
            yield from self._nvlink_task(task)
        self.tracker.landed_writes(task)
        if self.data is not None:
            self.data.apply(task)
        paid = task.op in (Op.COPY, Op.REDUCE, Op.GATHER) and cost.touches_peer(task)
        if paid and self.c.gpu.fused_peer_task_us:  # the fused kernel's fixed cost of a peer task
            yield self.env.timeout(self.c.gpu.fused_peer_task_us)
        for sig in task.signals:
            if sig.rank == task.rank or paid:
                self.board.bump(sig)
            else:  # a flag store to a peer lands one NVLink latency after it is issued
                delay = self.env.timeout(self.c.nvlink.latency_us)
                delay.callbacks.append(lambda _ev, sig=sig: self.board.bump(sig))

    def _nvlink_task(self, task: Task):
        """Local bytes stream while one weighted flow carries every peer transfer of the task."""
        transfers = cost.remote_transfers(task, self.itemsize)
        local_us = cost.local_bytes(task, self.itemsize) / self.sm_stream * self.inject.slowdown(task.rank)
        if not transfers:
            yield self.env.timeout(local_us + cost.step_us(task, self.c))
            return
        half = self.c.nvlink.half_efficiency_bytes
        legs = []
        for src, dst, b in transfers:
            legs += [(self.nv_out[src], b, b + half), (self.nv_in[dst], b, b + half)]
        size = sum(b + half for _, _, b in transfers)
        moved = self.flows.transfer_legs(size, legs, self.sm_copy)
        yield self.env.all_of([moved, self.env.timeout(local_us)])
        # the fused kernel's steps each wait a peer round trip: latency the port does not see
        yield self.env.timeout(self._stretch(self.c.nvlink.latency_us + cost.step_us(task, self.c)))

    def _stretch(self, us: float) -> float:
        """Under stress, a duration scaled by a seeded factor in [1/(1+stress), 1+stress]."""
        if self.stress <= 0:
            return us
        return us * (1.0 + self.stress) ** self.stress_rng.uniform(-1.0, 1.0)

    def bump_all(self, signals: tuple[Signal, ...]) -> None:
        for sig in signals:
            self.board.bump(sig)

    # -- metrics -------------------------------------------------------------------------------
    def nvlink_bytes(self) -> list[float]:
        return [link.bytes for link in self.nv_out]

    def all_links(self) -> list[tuple[int, Link]]:
        """(rank, link) for every modelled link."""
        out = [(r, l) for r, l in enumerate(self.nv_out)] + [(r, l) for r, l in enumerate(self.nv_in)]
        for per, links in ((self.net.nic_out, "out"), (self.net.nic_in, "in")):
            out += [(r, l) for r, ls in enumerate(per) for l in ls]
        return out
