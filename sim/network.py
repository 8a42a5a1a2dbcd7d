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
:class:`~mkernel.ir.MemberRef` of its group (the member is not built): what the network reads of
it is worked out once per group (:class:`Put`), since each read of an IR task's field is a generic
attribute lookup from the compiled core. Cluster terms are kept as fields for the same reason, and
a fault knob that is off is not drawn on (its draw would return nothing, taking no random number).
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from mkernel import cost
from mkernel.errors import TransportError
from mkernel.ir import COMMAND_BYTES, MemberRef, Task

from .flows import Link, Plan
from .proxy import Host, Proxy, Ring
from .signals import flat_keys

if TYPE_CHECKING:
    from .engine import Model


class Put:
    """What the network reads of a put's entry: its source, bytes, each member's destination and flag
    keys, and its messages' flow plans (by destination and NIC). A group's is made once and kept: its
    members are sent one by one, and each read of the entry's fields is a generic lookup."""

    __slots__ = ("entry", "src", "nbytes", "rank", "dk", "rotate", "period", "keys", "per", "plans")

    def __init__(self, entry: Task, itemsize: dict[str, int]) -> None:
        self.entry = entry
        self.src: int = entry.rank
        reads, count = entry.reads, entry.count
        self.nbytes: float = sum(cost.nbytes(r, itemsize) for r in reads)
        # a member's destination: Task.region_rank of its first write, member 0's stepped by Task.offset
        k = len(reads)
        self.rank: int = entry.region_rank(k, 0)
        self.dk = self.rotate = 0
        self.period = count
        if count > 1:  # (a group's step)
            st = entry.step
            self.dk, self.rotate, self.period = st.regions[k][0] if st.regions else 0, st.rotate, st.period or count
        keys, times, repeat = flat_keys(entry)  # the members' flag keys, member by member
        self.keys = keys
        # each member's share of them; 0: every member bumps all of ``keys`` once (none steps, or one member)
        self.per: int = len(keys) // count if count > 1 and times == 1 and repeat == 1 else 0
        self.plans: dict[int, Plan] = {}  # by destination x NIC count + NIC

    def dst(self, i: int) -> int:
        """Member ``i``'s destination (``entry.region_rank(len(entry.reads), i)``)."""
        if not self.dk or i == 0:
            return self.rank
        p = self.period
        off = i - p if self.rotate and i % p >= p - self.rotate else i
        return self.rank + off * self.dk

    def keys_of(self, i: int) -> list[int]:
        """Member ``i``'s flag keys, as ``flat_keys(entry, i, 1)`` lists them (bumped once each; the list
        is the board's to read, not to keep)."""
        per = self.per
        return self.keys[i * per:(i + 1) * per] if per else self.keys


class Message:
    """One network write (``flag``: a flag write of its own) from send to completion: its steps."""

    __slots__ = ("net", "task", "put", "i", "n", "src", "dst", "home", "sources", "then", "queued", "seq", "attempt",
                 "flag", "plan")

    def __init__(self, net: Network, task: Task | MemberRef, put: Put, i: int, n: int | None, sources: Any,
                 then: Callable[[], None] | None = None, flag: bool = False) -> None:
        self.net, self.task, self.put, self.i, self.n = net, task, put, i, n
        self.sources, self.then, self.flag = sources, then, flag  # then: the send SM's, once its command is handed on
        self.src = put.src  # (a member's rank is its group's)
        self.dst = self.home = put.dst(i)
        self.queued = 0.0  # when its command was written to the ring
        self.seq = self.attempt = 0
        self.plan: Plan | None = None  # its flow's plan (none for a flag write: no payload)

    def start(self, _arg: object = None) -> None:
        """Its first step: bytes, the NIC (rail) it takes, the per-message cost."""
        net = self.net
        if not self.flag:
            put, src, dst, count = self.put, self.src, self.dst, net.nic_count
            net.m.net_bytes[src] += put.nbytes
            self.home = home = net.m.home[dst % len(net.nic_in)]  # a collapsed run folds other nodes onto the simulated one
            i = self.seq % count if not net.nic_down else net.m.inject.nic((src, home), self.seq, count)
            if i is None:
                return  # every NIC this message could use is down: lost
            key = dst * count + i
            plan = put.plans.get(key)
            if plan is None:
                plan = put.plans[key] = net.plan(put.nbytes, src, dst, home, i)
            self.plan = plan
        net.env.call_later(net.per_message_us, self._wire)

    def _wire(self, _arg: object) -> None:
        plan = self.plan
        if plan is not None:
            self.net.m.flows.transfer_plan(plan, 1, self._moved)
            return
        self._moved(None)

    def _moved(self, _arg: object) -> None:
        """One transmission is over: lost (resent after the ack timer, or an error completion) or on its way."""
        net = self.net
        m = net.m
        if net.drop and m.inject.drops():
            f = m.inject.f
            if self.attempt == f.retries:
                raise TransportError(
                    f"rank {self.src} -> rank {self.dst}: {self.task.describe()} was lost: {f.retries + 1} "
                    f"transmissions dropped (fault drop={f.drop}), and the NIC reports an error completion (retry count "
                    f"exhausted after {f.retries} resends) at t={net.env.now:.1f} us")
            self.attempt += 1
            net.env.call_later(f.ack_timer_us(net.transport), self._resend)
            return
        if self.flag:
            delay = net.wire_delay()
            net.env.call_later(delay + (m.inject.extra_delay() if net.extra else 0.0), self._flagged)
        else:
            delay = m._stretch(net.wire_delay())
            net.env.call_later(delay + (m.inject.extra_delay() if net.extra else 0.0), self._landed)

    def _resend(self, _arg: object) -> None:
        self.net.env.call_later(self.net.per_message_us, self._wire)

    def _landed(self, _arg: object) -> None:
        net = self.net
        m = net.m
        self._deliver(None)
        if net.dup and m.inject.duplicates():  # delivered again later: the same bytes; a set flag stays set
            net.env.call_later(m.inject.f.reorder_us, self._deliver)
        net.env.call_later(net.latency_us, self._completed)  # the completion travels back
        if net.in_order:
            self._flagged(None)  # same connection, in order: visible with the data
        elif net.imm:
            net.host[self.home].request(self._receiving)  # the receiving proxy sets the flag

    def _completed(self, _arg: object) -> None:
        self.net.completed(self.src, self.dst)

    def _receiving(self, _arg: object) -> None:
        net = self.net
        net.env.call_later(net.next_poll() - net.env.now + net.per_command_us, self._received)

    def _received(self, _arg: object) -> None:
        net = self.net
        net.host[self.home].release()
        net.m.host_bytes[self.home] += net.command_bytes
        self._flagged(None)

    def _flagged(self, _arg: object) -> None:
        """The member's flags land: its keys as the engine's bumps list them (no Signal made)."""
        self.net.m.board.bump_keys(self.put.keys_of(self.i))

    def _deliver(self, _arg: object) -> None:
        """Its bytes land (once, or again for a duplicate)."""
        m = self.net.m
        m.log.landed_writes(self.put.entry, self.i, self.n)
        if m.data is not None:
            m.data.apply(self.put.entry, self.sources)  # (a run with data runs the flat schedule: the task itself)


class Network:
    """Owns the rings, proxies, NIC links and in-flight accounting of one simulated run."""

    def __init__(self, model: Model, seed: int) -> None:
        self.m = model
        self.env, self.c = model.env, model.c
        world = model.s.world
        c, f = self.c, model.inject.f
        nic = cost.bytes_per_us(c.nic.gbit_per_s / 8.0)
        self.nic_out = [[Link(f"nic{i}.out", nic) for i in range(c.nic.count)] for _ in range(world)]
        self.nic_in = [[Link(f"nic{i}.in", nic) for i in range(c.nic.count)] for _ in range(world)]
        self.rings = [Ring(self.env, c.proxy.queue_depth) for _ in range(world)]
        fab = c.fabric
        self.groups = 1 if not fab.nodes_per_leaf else -(-c.nodes // fab.nodes_per_leaf)
        group_nodes = min(fab.nodes_per_leaf or c.nodes, c.nodes)  # a collapsed run simulates whole groups
        spine = nic * c.nic.count * group_nodes / fab.oversubscription  # one spine plane per rail
        self.spine_up = [[Link(f"leaf{i}.rail{r}.up", spine) for r in range(c.gpus_per_node)] for i in range(self.groups)]
        self.spine_down = [[Link(f"leaf{i}.rail{r}.down", spine) for r in range(c.gpus_per_node)]
                           for i in range(self.groups)]
        # the cluster's terms and the fault knobs, read once (each read of a spec's field is a generic lookup)
        self.transport, self.mode = c.transport, c.notify_mode
        self.ibgda = c.transport == "ibgda"
        self.in_order = self.mode == "flag" and c.transport != "efa_srd"  # a flag write lands with its data
        self.flag_behind = self.mode == "flag" and c.transport == "efa_srd"  # a flag write of its own, unordered
        self.imm, self.fence = self.mode == "imm", self.mode == "fence"
        self.nic_count, self.per_message_us, self.latency_us = c.nic.count, c.nic.per_message_us, c.nic.latency_us
        self.jitter_us = c.nic.srd_jitter_us if c.transport == "efa_srd" else 0.0
        self.gpu_enqueue_us, self.ibgda_post_us = c.proxy.gpu_enqueue_us, c.nic.ibgda_post_us
        self.poll_us, self.per_command_us = c.proxy.poll_us, c.proxy.per_command_us
        self.command_bytes: float = COMMAND_BYTES
        self.drop, self.dup, self.extra = f.drop > 0, f.duplicate > 0, f.delay_us > 0 or f.reorder > 0  # (at 0: no draw)
        self.nic_down = f.nic_down is not None
        self.host = [Host(self.env) for _ in range(world)]  # one proxy thread
        self.proxies: list[Proxy | None] = [None] * world  # started at a rank's first command
        self.outstanding = [0] * world
        self.to_peer: dict[int, int] = {}  # writes in flight by pair (src, dst) (pair())
        self.drained: dict[int, Callable[[Any], None]] = {}  # a pair or a rank -> the call waiting for its writes to drop
        self.rng = random.Random(seed)
        self.sent = 0
        # the proxies' counters, summed over ranks (metrics)
        self.commands = self.batches = self.doorbells = self.fences = 0
        self.proxy_busy_us = self.fence_wait_us = self.ring_wait_us = self.credit_wait_us = 0.0
        self.fence_wait = [0.0] * world  # per rank: the proxy is blocked in fences
        self.starting: list[Callable[[Any], None]] | None = None  # first steps of the messages the proxy step being run posts
        self._plans: dict[tuple, Plan] = {}  # flow plans by (bytes, src, dst, home, NIC)
        self._puts: dict[int, Put] = {}  # a group's, by id(group): the schedule's entries

    @property
    def metrics(self) -> dict[str, float]:
        """The proxies' counters, summed over ranks."""
        return {"commands": self.commands, "batches": self.batches, "doorbells": self.doorbells, "fences": self.fences,
                "proxy_busy_us": self.proxy_busy_us, "fence_wait_us": self.fence_wait_us,
                "ring_wait_us": self.ring_wait_us, "credit_wait_us": self.credit_wait_us}

    # -- the send SM's side ----------------------------------------------------------------------
    def send(self, task: Task | MemberRef, sources: Any, then: Callable[[], None]) -> None:
        """What a send SM spends on a PUT: a ring command, or an IBGDA post; then ``then()`` (its SM is
        free). Called where its process would start; each step below is a plain call scheduled where
        that process would resume (a number waited: a timer; the ring's credit: a callback of its event)."""
        if isinstance(task, MemberRef):
            entry = task.task
            put = self._puts.get(id(entry))
            if put is None:
                put = self._puts[id(entry)] = Put(entry, self.m.itemsize)
            msg = Message(self, task, put, task.i, 1, sources, then)
        else:  # (a plain task: the tracker's build of a member, made for this call)
            msg = Message(self, task, Put(task, self.m.itemsize), 0, None, sources, then)
        self.m.log.check_reads(msg.put.entry, self.env.now, msg.i, msg.n)
        if self.ibgda:
            self.env.call_later(self.ibgda_post_us, self._ibgda_posted, msg)
            return
        self.env.call_later(self.gpu_enqueue_us, self._enqueued, msg)

    def _ibgda_posted(self, msg: Message) -> None:
        self.launch(msg)
        if msg.then is not None:
            msg.then()

    def _enqueued(self, msg: Message) -> None:
        """The command is written to the ring, or waits there for a credit."""
        rank = msg.src
        self.m.host_bytes[rank] += self.command_bytes
        msg.queued = self.env.now
        full = self.rings[rank].put(msg)
        if full is not None:
            full.callbacks.append(partial(self._credited, msg))
            return
        self._handed(msg)

    def _credited(self, msg: Message, _event: object) -> None:
        self.credit_wait_us += self.env.now - msg.queued
        self._handed(msg)

    def _handed(self, msg: Message) -> None:
        """The command is in the ring: the rank's proxy starts at its first one."""
        rank = msg.src
        if self.proxies[rank] is None:
            proxy = self.proxies[rank] = Proxy(self, rank)
            self.env.call_first(proxy.top)
        if msg.then is not None:
            msg.then()  # (the send SM is free)

    # -- messages on the wire --------------------------------------------------------------------
    def launch(self, msg: Message) -> None:
        """Post ``msg`` to the NIC (and on ``efa_srd`` with flags, its flag right behind it, unordered)."""
        src = msg.src
        self.outstanding[src] += 1
        pair = self.pair(src, msg.dst)
        self.to_peer[pair] = self.to_peer.get(pair, 0) + 1
        self.sent += 1
        msg.seq = self.sent
        self._first(msg.start)
        if self.flag_behind:
            self.start_flag(msg)

    def start_flag(self, msg: Message) -> None:
        """A flag write of its own for ``msg``'s member (fence, or unordered flags on SRD)."""
        self._first(Message(self, msg.task, msg.put, msg.i, msg.n, None, flag=True).start)

    def _first(self, start: Callable[[Any], None]) -> None:
        """Run a message's first step where its process would start: before the instant's other events.
        Posted by a proxy step, it runs when that step ends (:meth:`posting`)."""
        if self.starting is not None:
            self.starting.append(start)
        else:
            self.env.call_first(start)

    def posting(self, call: tuple[Callable[[Any], None], Any]) -> None:
        """Run the proxy's step ``call`` (fn, arg), then the first steps of the messages it posted, in
        order. A proxy step is an event of normal priority, so nothing else is due before its
        messages' first steps would be (each one's own event, after it): they are its end, one
        event each fewer."""
        starts: list[Callable[[Any], None]] = []
        self.starting = starts
        call[0](call[1])
        self.starting = None
        for start in starts:
            start(None)

    def plan(self, nbytes: float, src: int, dst: int, home: int, i: int) -> Plan:
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
        if self.jitter_us > 0:
            jitter = self.rng.expovariate(1.0 / self.jitter_us)
        return self.latency_us + jitter

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

    @staticmethod
    def pair(src: int, dst: int) -> int:
        """The key of the connection ``src`` -> ``dst`` in ``to_peer`` and ``drained`` (above every rank's:
        a collapsed run's destinations reach past its ranks)."""
        return ((src + 1) << 32) + dst

    def completed(self, src: int, dst: int) -> None:
        self.outstanding[src] -= 1
        pair = self.pair(src, dst)
        self.to_peer[pair] -= 1
        for key in (src, pair) if self.drained else ():  # (mostly none waits: no pops of boxed keys)
            then = self.drained.pop(key, None)
            if then is not None:
                self.env.call_later(0.0, then)

    def when_drained(self, key: int, then: Callable[[Any], None]) -> None:
        """Call ``then(None)`` at the next completion of a write from ``key`` (a rank, or a :meth:`pair`)."""
        self.drained[key] = then

    def next_poll(self) -> float:
        """When a proxy polling every ``poll_us`` next looks (now, if it never sleeps)."""
        poll, now = self.poll_us, self.env.now
        if poll <= 0:
            return now
        # the tolerance keeps a time a rounding error past a poll on that poll, never before now
        at = math.ceil(now / poll - 1e-9) * poll
        return at if at > now else now  # (max(now, at))

    def links(self) -> list[Link]:
        return [link for per in self.nic_out + self.nic_in + self.spine_up + self.spine_down for link in per]
