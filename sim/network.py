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

The proxy's loop is :mod:`mkernel.sim.proxy`. A message on the wire is a :class:`Message` whose
steps are plain calls, each scheduled where the SimPy process it replaces would resume (the first
one where that process would start, before the instant's other events), so every event keeps its
place in the event order. A put member reaches :meth:`Network.send` as the hazard tracker's
:class:`~mkernel.ir.MemberRef` of its group (the member is not built): its destination and
signals are read through the group.
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable
from functools import partial

from mkernel import cost
from mkernel.errors import TransportError
from mkernel.ir import COMMAND_BYTES, MemberRef, Task

from .flows import Link
from .proxy import Host, Proxy, Ring
from .signals import flat_keys


class Message:
    """One network write (``flag``: a flag write of its own) from send to completion: its steps."""

    __slots__ = ("net", "task", "entry", "i", "n", "src", "dst", "sources", "queued", "seq", "flag", "attempt",
                 "plan", "home")

    def __init__(self, net: Network, task: Task | MemberRef, sources, flag: bool = False) -> None:
        self.net, self.task, self.sources, self.flag = net, task, sources, flag
        if type(task) is MemberRef:  # a group's member: what is read of it, through its group
            self.n: int | None
            self.entry, self.i, self.n = task.task, task.i, 1
        else:
            self.entry, self.i, self.n = task, 0, None
        self.src = self.entry.rank  # (a member's rank is its group's)
        self.dst = self.entry.region_rank(len(self.entry.reads), self.i)
        self.queued = 0.0  # when its command was written to the ring
        self.seq = self.attempt = 0
        self.plan: tuple = ()  # its flow's plan (none for a flag write: no payload)
        self.home = self.dst

    def start(self, _arg=None) -> None:
        """Its first step: bytes, the NIC (rail) it takes, the per-message cost."""
        net = self.net
        m, nic = net.m, net.c.nic
        if not self.flag:
            src, dst = self.src, self.dst
            nbytes = net.nbytes(self.entry, self.n)
            m.net_bytes[src] += nbytes
            self.home = home = m.home[dst % len(net.nic_in)]  # a collapsed run folds other nodes onto the simulated one
            i = m.inject.nic((src, home), self.seq, nic.count)
            if i is None:
                return  # every NIC this message could use is down: lost
            self.plan = net.plan(nbytes, src, dst, home, i)
        net.env.call_later(nic.per_message_us, self._wire)

    def _wire(self, _arg) -> None:
        if self.plan:
            self.net.m.flows.transfer_plan(self.plan, 1, self._moved)
            return
        self._moved(None)

    def _moved(self, _arg) -> None:
        """One transmission is over: lost (resent after the ack timer, or an error completion) or on its way."""
        net = self.net
        m = net.m
        if m.inject.drops():
            f = m.inject.f
            if self.attempt == f.retries:
                raise TransportError(
                    f"rank {self.src} -> rank {self.dst}: {self.task.describe()} was lost: {f.retries + 1} "
                    f"transmissions dropped (fault drop={f.drop}), and the NIC reports an error completion (retry count "
                    f"exhausted after {f.retries} resends) at t={net.env.now:.1f} us")
            self.attempt += 1
            net.env.call_later(f.ack_timer_us(net.c.transport), self._resend)
            return
        if self.flag:
            net.env.call_later(net.wire_delay() + m.inject.extra_delay(), self._flagged)
        else:
            net.env.call_later(m._stretch(net.wire_delay()) + m.inject.extra_delay(), self._landed)

    def _resend(self, _arg) -> None:
        self.net.env.call_later(self.net.c.nic.per_message_us, self._wire)

    def _landed(self, _arg) -> None:
        net = self.net
        m, mode = net.m, net.mode
        self._deliver(None)
        if m.inject.duplicates():  # delivered again later: the same bytes; a set flag stays set
            net.env.call_later(m.inject.f.reorder_us, self._deliver)
        net.env.call_later(net.c.nic.latency_us, net.completed, (self.src, self.dst))  # the completion travels back
        if mode == "flag" and net.c.transport != "efa_srd":
            self._flagged(None)  # same connection, in order: visible with the data
        elif mode == "imm":
            net.host[self.home].request(self._receiving)  # the receiving proxy sets the flag

    def _receiving(self, _arg) -> None:
        net = self.net
        net.env.call_later(net.next_poll() - net.env.now + net.c.proxy.per_command_us, self._received)

    def _received(self, _arg) -> None:
        net = self.net
        net.host[self.home].release()
        net.m.host_bytes[self.home] += COMMAND_BYTES
        self._flagged(None)

    def _flagged(self, _arg) -> None:
        """The member's flags land: its keys as the engine's bumps list them (no Signal made)."""
        keys, times, repeat = flat_keys(self.entry, self.i, 1)
        self.net.m.board.bump_keys(keys, times, repeat)

    def _deliver(self, _arg) -> None:
        """Its bytes land (once, or again for a duplicate)."""
        m = self.net.m
        m.tracker.landed_writes(self.entry, self.i, self.n)
        if m.data is not None:
            m.data.apply(self.task, self.sources)


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
        self.mode = c.notify_mode
        self.host = [Host(self.env) for _ in range(world)]  # one proxy thread
        self.proxies: list[Proxy | None] = [None] * world  # started at a rank's first command
        self.outstanding = [0] * world
        self.to_peer: dict[tuple[int, int], int] = {}
        self.drained: dict = {}  # (src, dst) or src -> the call waiting for in-flight writes to drop
        self.rng = random.Random(seed)
        self.sent = 0
        self.metrics = {"commands": 0, "batches": 0, "doorbells": 0, "fences": 0, "proxy_busy_us": 0.0,
                        "fence_wait_us": 0.0, "ring_wait_us": 0.0, "credit_wait_us": 0.0}  # summed over ranks
        self.fence_wait = [0.0] * world  # per rank: the proxy is blocked in fences
        self.starting: list | None = None  # first steps of the messages the proxy step being run posts
        self._plans: dict[tuple, tuple] = {}  # flow plans by (bytes, src, dst, home, NIC)
        self._nbytes: dict[int, float] = {}  # bytes of a group's member, by id(group): the schedule's entries

    # -- the send SM's side ----------------------------------------------------------------------
    def send(self, task: Task | MemberRef, sources, then: Callable[[], None]) -> None:
        """What a send SM spends on a PUT: a ring command, or an IBGDA post; then ``then()`` (its SM is
        free). Called where its process would start; each step below is a plain call scheduled where
        that process would resume (a number waited: a timer; the ring's credit: a callback of its event)."""
        msg = Message(self, task, sources)
        self.m.tracker.check_reads(msg.entry, self.env.now, msg.i, msg.n)
        if self.c.transport == "ibgda":
            self.env.call_later(self.c.nic.ibgda_post_us, self._ibgda_posted, (msg, then))
            return
        self.env.call_later(self.c.proxy.gpu_enqueue_us, self._enqueued, (msg, then))

    def _ibgda_posted(self, state: tuple) -> None:
        msg, then = state
        self.launch(msg)
        then()

    def _enqueued(self, state: tuple) -> None:
        """The command is written to the ring, or waits there for a credit."""
        msg, then = state
        rank = msg.src
        self.m.host_bytes[rank] += COMMAND_BYTES
        msg.queued = self.env.now
        full = self.rings[rank].put(msg)
        if full is not None:
            full.callbacks.append(partial(self._credited, msg, then, self.env.now))
            return
        self._handed(msg, then)

    def _credited(self, msg: Message, then: Callable[[], None], start: float, _event) -> None:
        self.metrics["credit_wait_us"] += self.env.now - start
        self._handed(msg, then)

    def _handed(self, msg: Message, then: Callable[[], None]) -> None:
        """The command is in the ring: the rank's proxy starts at its first one."""
        rank = msg.src
        if self.proxies[rank] is None:
            proxy = self.proxies[rank] = Proxy(self, rank)
            self.env.call_first(proxy.top)
        then()

    # -- messages on the wire --------------------------------------------------------------------
    def launch(self, msg: Message) -> None:
        """Post ``msg`` to the NIC (and on ``efa_srd`` with flags, its flag right behind it, unordered)."""
        src, dst = msg.src, msg.dst
        self.outstanding[src] += 1
        self.to_peer[(src, dst)] = self.to_peer.get((src, dst), 0) + 1
        self.sent += 1
        msg.seq = self.sent
        self._first(msg.start)
        if self.mode == "flag" and self.c.transport == "efa_srd":
            self.start_flag(msg)

    def start_flag(self, msg: Message) -> None:
        """A flag write of its own for ``msg``'s member (fence, or unordered flags on SRD)."""
        self._first(Message(self, msg.task, None, flag=True).start)

    def _first(self, start) -> None:
        """Run a message's first step where its process would start: before the instant's other events.
        Posted by a proxy step, it runs when that step ends (:meth:`posting`)."""
        if self.starting is not None:
            self.starting.append(start)
        else:
            self.env.call_first(start)

    def posting(self, call: tuple) -> None:
        """Run the proxy's step ``call`` (fn, arg), then the first steps of the messages it posted, in
        order. A proxy step is an event of normal priority, so nothing else is due before its
        messages' first steps would be (each one's own event, after it): they are its end, one
        event each fewer."""
        self.starting = []
        call[0](call[1])
        starts, self.starting = self.starting, None
        for start in starts:
            start(None)

    def nbytes(self, entry: Task, n: int | None) -> float:
        """What a message of ``entry`` carries (its members' regions are its own, moved): for a
        group's member (``n`` = 1), worked out once per group."""
        if n is None:
            return sum(cost.nbytes(r, self.m.itemsize) for r in entry.reads)
        nbytes = self._nbytes.get(id(entry))
        if nbytes is None:
            nbytes = self._nbytes[id(entry)] = sum(cost.nbytes(r, self.m.itemsize) for r in entry.reads)
        return nbytes

    def plan(self, nbytes: float, src: int, dst: int, home: int, i: int) -> tuple:
        """The flow plan of ``nbytes`` over the path of :meth:`_path` (:meth:`FlowNet.transfer`'s, each
        link at weight 1), made once per path and size."""
        key = (nbytes, src, dst, home, i)
        plan = self._plans.get(key)
        if plan is None:
            path = self._path(src, dst, home, i)
            plan = self._plans[key] = self.m.flows.plan_legs(nbytes, [(link, nbytes, nbytes) for link in path])
        return plan

    def wire_delay(self) -> float:
        jitter = 0.0
        if self.c.transport == "efa_srd" and self.c.nic.srd_jitter_us > 0:
            jitter = self.rng.expovariate(1.0 / self.c.nic.srd_jitter_us)
        return self.c.nic.latency_us + jitter

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

    def completed(self, pair: tuple[int, int]) -> None:
        src, dst = pair
        self.outstanding[src] -= 1
        self.to_peer[(src, dst)] -= 1
        for key in (src, (src, dst)):
            then = self.drained.pop(key, None)
            if then is not None:
                self.env.call_later(0.0, then)

    def when_drained(self, key, then) -> None:
        """Call ``then(None)`` at the next completion of a write from ``key`` (a rank, or a (src, dst) pair)."""
        self.drained[key] = then

    def next_poll(self) -> float:
        """When a proxy polling every ``poll_us`` next looks (now, if it never sleeps)."""
        poll = self.c.proxy.poll_us
        # the tolerance keeps a time a rounding error past a poll on that poll, never before now
        return self.env.now if poll <= 0 else max(self.env.now, math.ceil(self.env.now / poll - 1e-9) * poll)

    def links(self) -> list[Link]:
        return [link for per in self.nic_out + self.nic_in + self.spine_up + self.spine_down for link in per]
