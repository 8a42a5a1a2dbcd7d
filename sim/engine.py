"""The SimPy model of one schedule on one cluster.

Each rank runs its launches in stream order. In a launch, each role gets as many worker processes
as it has SMs; the workers of one role take that role's tasks in queue order, wait for the task's
signals, then spend the task's cost:

- GEMM: :func:`cost.gemm_us` on the SM.
- COPY/REDUCE: the SM streams its local bytes at ``sm_stream_gb_per_s`` while it drives one flow
  per peer region over the NVLink ports (source egress, destination ingress), capped together by
  what one SM can copy over NVLink (``sm_copy_gb_per_s``).
- PUT: the SM writes a command for the host proxy and moves on. The proxy (one per rank) picks it
  up at its next poll, spends its per-command cost, and the NIC sends the message after its
  per-message cost and latency over the NIC links of both ends. On ``ib_rc`` the flag write follows
  the data on the same connection, so the signal is bumped when the data has landed. On ``efa_srd``
  the receiving proxy sets the flag after the receive completion (its poll and per-command cost).

Signals are epoch-stamped counters. A signal on another rank is bumped after the NVLink latency.
If the event queue drains while workers still wait, :class:`DeadlockError` lists every waiter.
"""
from __future__ import annotations

import math
from collections import defaultdict

import simpy

from mkernel.cluster import Cluster
from mkernel.errors import DeadlockError
from mkernel.ir import Op, Role, Schedule, Signal, Task

from . import cost
from .data import DataStore
from .flows import FlowNet, Link

COMMAND_BYTES = 48  # one command record in the GPU -> host ring


class CountingEnvironment(simpy.Environment):
    """A SimPy environment that counts the events it processes."""

    def __init__(self) -> None:
        super().__init__()
        self.events = 0

    def step(self) -> None:
        self.events += 1
        super().step()


class SignalBoard:
    """Epoch-stamped counters: a value counts only if written in the current epoch."""

    def __init__(self, env: simpy.Environment, epoch: int) -> None:
        self.env = env
        self.epoch = epoch
        self.values: dict[Signal, tuple[int, int]] = {}
        self.waiters: dict[Signal, list[tuple[int, simpy.Event]]] = defaultdict(list)

    def count(self, sig: Signal) -> int:
        epoch, value = self.values.get(sig, (-1, 0))
        return value if epoch == self.epoch else 0

    def bump(self, sig: Signal) -> None:
        value = self.count(sig) + 1
        self.values[sig] = (self.epoch, value)
        waiting = self.waiters.get(sig)
        if waiting:
            still = []
            for need, event in waiting:
                if need <= value:
                    event.succeed()
                else:
                    still.append((need, event))
            self.waiters[sig] = still

    def wait(self, sig: Signal, need: int) -> simpy.Event | None:
        """An event that fires when ``sig`` reaches ``need``; None if it already has."""
        if self.count(sig) >= need:
            return None
        event = self.env.event()
        self.waiters[sig].append((need, event))
        return event


class Model:
    """Everything one simulated run owns: the environment, ports, proxies, signals and metrics."""

    def __init__(self, s: Schedule, c: Cluster, data: DataStore | None, epoch: int, trace: bool) -> None:
        self.s, self.c, self.data = s, c, data
        self.env = CountingEnvironment()
        self.flows = FlowNet(self.env)
        self.board = SignalBoard(self.env, epoch)
        self.itemsize = {b.name: b.itemsize for b in s.buffers}
        nv = cost.bytes_per_us(c.nvlink.bw_gb_per_s)
        nic = cost.bytes_per_us(c.nic.gb_per_s)
        self.nv_out = [Link(f"nvlink.out{r}", nv) for r in range(s.world)]
        self.nv_in = [Link(f"nvlink.in{r}", nv) for r in range(s.world)]
        self.nic_out = [Link(f"nic.out{r}", nic) for r in range(s.world)]
        self.nic_in = [Link(f"nic.in{r}", nic) for r in range(s.world)]
        self.proxy = [simpy.Resource(self.env, capacity=1) for _ in range(s.world)]
        self.sm_copy = cost.bytes_per_us(c.nvlink.sm_copy_gb_per_s)
        self.sm_stream = cost.bytes_per_us(c.gpu.sm_stream_gb_per_s)
        self.finish = [math.nan] * s.world
        self.net_bytes = [0.0] * s.world
        self.host_bytes = [0.0] * s.world
        self.commands = 0
        self.blocked: dict[int, tuple[Task, Signal, int]] = {}
        self.spans: list[tuple] | None = [] if trace else None
        queues: dict = defaultdict(list)
        for task in s.tasks:
            queues[(task.rank, task.launch, task.role)].append(task)
        self.queues = queues

    # -- running -------------------------------------------------------------------------------
    def run(self) -> None:
        for rank in range(self.s.world):
            self.env.process(self._rank(rank))
        self.env.run()
        if self.blocked:
            lines = [f"rank {t.rank} role {t.role.value} {t.describe()} waits for {sig} >= {need}, "
                     f"has {self.board.count(sig)}" for t, sig, need in self.blocked.values()]
            raise DeadlockError(f"deadlock at t={self.env.now:.3f} us in epoch {self.board.epoch}: "
                                f"{len(lines)} tasks wait on signals nothing will bump:\n  " + "\n  ".join(lines))

    def _rank(self, rank: int):
        for li, launch in enumerate(self.s.launches):
            if li > 0:
                yield self.env.timeout(self.c.launch_us)
            workers = []
            for role, sms in launch.sms:
                queue = self.queues.get((rank, li, role), [])
                shared = iter(queue)
                for slot in range(min(sms, len(queue))):
                    workers.append(self.env.process(self._worker(rank, role, slot, shared)))
            yield self.env.all_of(workers)
        self.finish[rank] = self.env.now

    def _worker(self, rank: int, role: Role, slot: int, queue):
        key = (rank, role, slot, id(queue))
        for task in queue:
            for wait in task.waits:
                event = self.board.wait(wait.signal, wait.count)
                if event is not None:
                    self.blocked[key] = (task, wait.signal, wait.count)
                    yield event
                    del self.blocked[key]
            start = self.env.now
            yield from self._execute(task)
            if self.spans is not None:
                self.spans.append((rank, role.value, slot, task.label or task.op.value, start, self.env.now))

    # -- task effects --------------------------------------------------------------------------
    def _execute(self, task: Task):
        if task.op is Op.GEMM:
            yield self.env.timeout(cost.gemm_us(task, self.itemsize, self.c))
        elif task.op in (Op.COPY, Op.REDUCE):
            yield from self._nvlink_task(task)
        elif task.op is Op.PUT:
            yield self.env.timeout(self.c.proxy.gpu_enqueue_us)
            self.host_bytes[task.rank] += COMMAND_BYTES
            sources = self.data.snapshot(task) if self.data is not None else None
            self.env.process(self._network(task, sources))
            return
        if self.data is not None:
            self.data.apply(task)
        self._signal(task, paid_latency=task.op is not Op.GEMM and self._touches_peer(task))

    def _nvlink_task(self, task: Task):
        transfers = cost.remote_transfers(task, self.itemsize)
        local_us = cost.local_bytes(task, self.itemsize) / self.sm_stream
        if not transfers:
            yield self.env.timeout(local_us)
            return
        cap = self.sm_copy / len(transfers)
        events = [self.flows.transfer(b, (self.nv_out[src], self.nv_in[dst]), cap) for src, dst, b in transfers]
        yield self.env.all_of(events + [self.env.timeout(local_us)])
        yield self.env.timeout(self.c.nvlink.latency_us)

    def _network(self, task: Task, sources):
        """The proxy posts the command; the NIC carries the message; the flag follows the data."""
        px, nic = self.c.proxy, self.c.nic
        with self.proxy[task.rank].request() as req:
            yield req
            yield self.env.timeout(self._next_poll() - self.env.now + px.per_command_us)
        self.commands += 1
        nbytes = sum(cost.nbytes(r, self.itemsize) for r in task.reads)
        dst = task.writes[0].rank
        self.net_bytes[task.rank] += nbytes
        yield self.env.timeout(nic.per_message_us)
        yield self.flows.transfer(nbytes, (self.nic_out[task.rank], self.nic_in[dst]))
        yield self.env.timeout(nic.latency_us)
        if self.data is not None:
            self.data.apply(task, sources)
        if self.c.transport == "efa_srd":
            # SRD does not order a flag write behind its data: the data goes as write-with-immediate
            # and the receiving proxy sets the flag once it sees the receive completion.
            with self.proxy[dst].request() as req:
                yield req
                yield self.env.timeout(self._next_poll() - self.env.now + px.per_command_us)
            self.host_bytes[dst] += COMMAND_BYTES
        for sig in task.signals:
            self.board.bump(sig)

    def _next_poll(self) -> float:
        """When a proxy polling every ``poll_us`` next looks at its ring (now, if it never sleeps)."""
        poll = self.c.proxy.poll_us
        return self.env.now if poll <= 0 else math.ceil(self.env.now / poll - 1e-9) * poll

    @staticmethod
    def _touches_peer(task: Task) -> bool:
        return any(r.rank != task.rank for r in task.reads + task.writes)

    def _signal(self, task: Task, paid_latency: bool) -> None:
        """Bump the task's signals. A flag store to a peer lands one NVLink latency after it is
        issued, unless the task already waited that latency for its own peer stores to land."""
        for sig in task.signals:
            if sig.rank == task.rank or paid_latency:
                self.board.bump(sig)
            else:
                delay = self.env.timeout(self.c.nvlink.latency_us)
                delay.callbacks.append(lambda _ev, sig=sig: self.board.bump(sig))

    # -- metrics -------------------------------------------------------------------------------
    def nvlink_bytes(self) -> list[float]:
        return [link.bytes for link in self.nv_out]
