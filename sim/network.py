"""The inter-node path: command ring, host proxy, NICs and the three transports.

``ib_rc`` and ``efa_srd`` go through the proxy::

    send SM --(48-byte command, one ring credit)--> ring --(poll)--> proxy --(batch, doorbell)--> NIC
    NIC --(per-message cost, bytes over the NIC links of both ends, latency [+ SRD jitter])--> peer

- The ring holds ``queue_depth`` commands; a send SM waits for a free slot (a credit).
- The proxy wakes at its next poll after a command arrives. If the first connection's batch is not
  full it waits ``batch_window_us`` once for more (a bounded window), then posts up to ``batch``
  commands per connection: ``per_command_us`` each plus one ``doorbell_us`` per batch.
- At most ``max_outstanding`` writes per proxy are in flight; a completion returns one NIC
  latency after delivery.
- A GPU with ``count`` NICs stripes its messages over them round-robin.
- With leaf groups (``Cluster.fabric``), a message between groups also crosses its source group's
  spine uplink and its destination group's downlink. Each rail has its own spine plane, shared by
  the group's NICs of that rail at 1 / ``oversubscription`` of their rate (flows spread by ECMP). A collapsed run simulates one whole group
  (``Cluster.fold_nodes``), so the mirror image of a message it sends out of the group arrives
  through that group's downlink.

Arrival notification (``Cluster.notify_mode``):

- ``flag``: a flag write follows the data. ``ib_rc`` and ``ibgda`` deliver it in order, so it is
  visible with the data. On ``efa_srd`` it is a separate message with its own jitter and may land
  first: that is the protocol bug the hazard detector must catch.
- ``imm``: write-with-immediate; the receiving proxy sees the completion at its next poll and
  sets the flag (``per_command_us``).
- ``fence``: after posting, the sending proxy blocks until every write to that peer has completed
  (fence cost grows with what is in flight), then posts the flag write.

``ibgda`` skips the proxy: the send SM pays ``ibgda_post_us`` (system fence + doorbell) per chunk.
SRD jitter is exponential with mean ``srd_jitter_us``, drawn from a ``random.Random(seed)``.
"""
from __future__ import annotations

import math
import random
from collections import deque

import simpy

from mkernel import cost
from mkernel.errors import TransportError
from mkernel.ir import COMMAND_BYTES, Task

from .flows import Link


class Ring:
    """A bounded FIFO of commands in pinned host memory; a full ring makes the GPU wait."""

    def __init__(self, env: simpy.Environment, depth: int) -> None:
        self.env = env
        self.depth = depth
        self.items: deque = deque()
        self.nonempty_us = 0.0  # time with at least one command waiting for the proxy
        self._since = 0.0
        self.blocked: deque = deque()  # (event, item) of puts waiting for a credit
        self.reader: simpy.Event | None = None

    def put(self, item) -> simpy.Event | None:
        """Append ``item``; returns an event to wait on when the ring is full, else None."""
        if len(self.items) < self.depth:
            if not self.items:
                self._since = self.env.now
            self.items.append(item)
            if self.reader is not None and not self.reader.triggered:
                self.reader.succeed()
            return None
        event = self.env.event()
        self.blocked.append((event, item))
        return event

    def wait_nonempty(self) -> simpy.Event | None:
        if self.items:
            return None
        self.reader = self.env.event()
        return self.reader

    def take(self, dst: int, limit: int) -> list:
        """Remove and return up to ``limit`` commands for peer ``dst``, freeing their credits."""
        taken, kept = [], deque()
        for item in self.items:
            if len(taken) < limit and item[0].writes[0].rank == dst:
                taken.append(item)
            else:
                kept.append(item)
        self.items = kept
        while self.blocked and len(self.items) < self.depth:
            event, item = self.blocked.popleft()
            self.items.append(item)
            event.succeed()
        if taken and not self.items:
            self.nonempty_us += self.env.now - self._since
        return taken


class Network:
    """Owns the rings, proxies, NIC links and in-flight accounting of one simulated run."""

    def __init__(self, model, seed: int) -> None:
        self.m = model
        self.env, self.c = model.env, model.c
        world = model.s.world
        nic = cost.bytes_per_us(self.c.nic.gbit_per_s / 8.0)
        self.nic_out = [[Link(f"nic{i}.out", nic) for i in range(self.c.nic.count)] for _ in range(world)]
        self.nic_in = [[Link(f"nic{i}.in", nic) for i in range(self.c.nic.count)] for _ in range(world)]
        self.rings = [Ring(self.env, self.c.proxy.queue_depth) for _ in range(world)]
        fab, c = self.c.fabric, self.c
        self.groups = 1 if not fab.nodes_per_leaf else -(-c.nodes // fab.nodes_per_leaf)
        group_nodes = min(fab.nodes_per_leaf or c.nodes, c.nodes)  # a collapsed run simulates whole groups
        spine = nic * c.nic.count * group_nodes / fab.oversubscription  # one spine plane per rail
        self.spine_up = [[Link(f"leaf{i}.rail{r}.up", spine) for r in range(c.gpus_per_node)] for i in range(self.groups)]
        self.spine_down = [[Link(f"leaf{i}.rail{r}.down", spine) for r in range(c.gpus_per_node)]
                           for i in range(self.groups)]
        self.host = [simpy.Resource(self.env, capacity=1) for _ in range(world)]  # one proxy thread
        self.started = [False] * world
        self.outstanding = [0] * world
        self.to_peer: dict[tuple[int, int], int] = {}
        self.drained: dict = {}  # (src, dst) or src -> events waiting for in-flight writes to drop
        self.rng = random.Random(seed)
        self.sent = 0
        self.metrics = {"commands": 0, "batches": 0, "doorbells": 0, "fences": 0, "proxy_busy_us": 0.0,
                        "fence_wait_us": 0.0, "ring_wait_us": 0.0, "credit_wait_us": 0.0}  # summed over ranks
        self.fence_wait = [0.0] * world  # per rank: the proxy is blocked in fences

    # -- the send SM's side ----------------------------------------------------------------------
    def send(self, task: Task, sources):
        """What a send SM spends on a PUT: a ring command, or an IBGDA post."""
        m = self.m
        m.tracker.check_reads(task, self.env.now)
        if self.c.transport == "ibgda":
            yield self.c.nic.ibgda_post_us
            self._launch(task, sources)
            return
        yield self.c.proxy.gpu_enqueue_us
        m.host_bytes[task.rank] += COMMAND_BYTES
        full = self.rings[task.rank].put((task, sources, self.env.now))
        if full is not None:
            start = self.env.now
            yield full
            self.metrics["credit_wait_us"] += self.env.now - start
        if not self.started[task.rank]:
            self.started[task.rank] = True
            self.env.start(self._proxy(task.rank))

    # -- the host proxy ----------------------------------------------------------------------------
    def _proxy(self, rank: int):
        px = self.c.proxy
        ring = self.rings[rank]
        while True:
            wake = ring.wait_nonempty()
            if wake is not None:
                yield wake
            yield self._next_poll() - self.env.now
            stall = self.m.inject.stall(rank, self.env.now)
            if stall is not None:  # an injected stall: a finite pause, or for good (ends in a deadlock error)
                yield self.env.event() if math.isinf(stall) else stall
            first_dst = ring.items[0][0].writes[0].rank
            if sum(1 for it in ring.items if it[0].writes[0].rank == first_dst) < px.batch and px.batch_window_us > 0:
                yield px.batch_window_us
            for dst in dict.fromkeys(it[0].writes[0].rank for it in ring.items):
                yield from self._post_batch(rank, ring.take(dst, px.batch))

    def _post_batch(self, rank: int, batch: list):
        px = self.c.proxy
        with self.host[rank].request() as req:
            yield req
            start = self.env.now
            for _task, _src, queued in batch:
                self.metrics["ring_wait_us"] += start - queued
            yield px.per_command_us * len(batch) + px.doorbell_us
            self.metrics["proxy_busy_us"] += self.env.now - start
            self.metrics["batches"] += 1
            self.metrics["doorbells"] += 1
            self.metrics["commands"] += len(batch)
            self.m.proxy_spans.append((rank, start, self.env.now, len(batch)))
        for task, sources, _queued in batch:
            while self.outstanding[rank] >= px.max_outstanding:
                yield self._drain_event(rank)
            self._launch(task, sources)
        if self.c.notify_mode == "fence":
            dst = batch[0][0].writes[0].rank
            start = self.env.now
            while self.to_peer.get((rank, dst), 0) > 0:
                yield self._drain_event((rank, dst))
            self.metrics["fences"] += 1
            self.metrics["fence_wait_us"] += self.env.now - start
            self.fence_wait[rank] += self.env.now - start
            yield px.per_command_us + px.doorbell_us
            for task, _sources, _queued in batch:
                self.env.start(self._flag_message(task))

    # -- messages on the wire --------------------------------------------------------------------
    def _launch(self, task: Task, sources) -> None:
        src, dst = task.rank, task.writes[0].rank
        self.outstanding[src] += 1
        self.to_peer[(src, dst)] = self.to_peer.get((src, dst), 0) + 1
        self.sent += 1
        self.env.start(self._data_message(task, sources, self.sent))
        if self.c.notify_mode == "flag" and self.c.transport == "efa_srd":
            self.env.start(self._flag_message(task))  # posted right behind the data, unordered

    def _wire_delay(self) -> float:
        jitter = 0.0
        if self.c.transport == "efa_srd" and self.c.nic.srd_jitter_us > 0:
            jitter = self.rng.expovariate(1.0 / self.c.nic.srd_jitter_us)
        return self.c.nic.latency_us + jitter

    def _data_message(self, task: Task, sources, seq: int):
        m, nic = self.m, self.c.nic
        src, dst = task.rank, task.writes[0].rank
        nbytes = sum(cost.nbytes(r, m.itemsize) for r in task.reads)
        m.net_bytes[src] += nbytes
        home = m.home[dst % len(self.nic_in)]  # a collapsed run folds other nodes onto the simulated one
        i = m.inject.nic((src, home), seq, nic.count)
        if i is None:
            return  # every NIC this message could use is down: lost
        yield from self._transmit(task, nbytes, self._path(src, dst, home, i))
        yield m._stretch(self._wire_delay()) + m.inject.extra_delay()
        m.tracker.landed_writes(task)
        if m.data is not None:
            m.data.apply(task, sources)
        if m.inject.duplicates():  # delivered again later: the same bytes; a set flag stays set
            again = self.env.timeout(m.inject.f.reorder_us)
            again.callbacks.append(lambda _ev: self._deliver_again(task, sources))
        self.env.call_later(nic.latency_us, self._completed, (src, dst))  # the completion travels back
        mode = self.c.notify_mode
        if mode == "flag" and self.c.transport != "efa_srd":
            m.bump_all(task.signals)  # same connection, in order: visible with the data
        elif mode == "imm":
            with self.host[home].request() as req:  # the receiving proxy sets the flag
                yield req
                yield self._next_poll() - self.env.now + self.c.proxy.per_command_us
            m.host_bytes[home] += COMMAND_BYTES
            m.bump_all(task.signals)

    def _transmit(self, task: Task, nbytes: float, path: tuple[Link, ...] = ()):
        """Send until a transmission is not dropped: each lost one costs its wire time and the
        sender's ack timer, as RC (and SRD) resend; past ``retries`` resends, an error completion."""
        f, nic = self.m.inject.f, self.c.nic
        for attempt in range(f.retries + 1):
            yield nic.per_message_us
            if path:
                yield self.m.flows.transfer(nbytes, path)
            if not self.m.inject.drops():
                return
            if attempt == f.retries:
                break
            yield f.ack_timer_us(self.c.transport)
        raise TransportError(
            f"rank {task.rank} -> rank {task.writes[0].rank}: {task.describe()} was lost: {f.retries + 1} "
            f"transmissions dropped (fault drop={f.drop}), and the NIC reports an error completion (retry count "
            f"exhausted after {f.retries} resends) at t={self.env.now:.1f} us")

    def _path(self, src: int, dst: int, home: int, i: int) -> tuple[Link, ...]:
        """NIC out, the spine if the message leaves its leaf group, NIC in. ``dst`` is the real
        destination; in a collapsed run the mirrored arrival uses the simulated group's downlink."""
        g, fab = self.c.gpus_per_node, self.c.fabric
        up, down = fab.group_of(src // g), fab.group_of(dst // g)
        if up == down:
            return (self.nic_out[src][i], self.nic_in[home][i])
        down = down if len(self.nic_in) == self.c.world else up
        return (self.nic_out[src][i], self.spine_up[up][src % g], self.spine_down[down][home % g],
                self.nic_in[home][i])

    def _flag_message(self, task: Task):
        yield from self._transmit(task, 0.0)
        yield self._wire_delay() + self.m.inject.extra_delay()
        self.m.bump_all(task.signals)

    def _deliver_again(self, task: Task, sources) -> None:
        self.m.tracker.landed_writes(task)
        if self.m.data is not None:
            self.m.data.apply(task, sources)

    def _completed(self, pair: tuple[int, int]) -> None:
        src, dst = pair
        self.outstanding[src] -= 1
        self.to_peer[(src, dst)] -= 1
        for key in (src, (src, dst)):
            event = self.drained.pop(key, None)
            if event is not None:
                event.succeed()

    def _drain_event(self, key) -> simpy.Event:
        if key not in self.drained:
            self.drained[key] = self.env.event()
        return self.drained[key]

    def _next_poll(self) -> float:
        """When a proxy polling every ``poll_us`` next looks (now, if it never sleeps)."""
        poll = self.c.proxy.poll_us
        # the tolerance keeps a time a rounding error past a poll on that poll, never before now
        return self.env.now if poll <= 0 else max(self.env.now, math.ceil(self.env.now / poll - 1e-9) * poll)

    def links(self) -> list[Link]:
        return [link for per in self.nic_out + self.nic_in + self.spine_up + self.spine_down for link in per]
