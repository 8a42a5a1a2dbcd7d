"""Bandwidth sharing between concurrent transfers (flow-level, not packet-level).

A :class:`Link` is one direction of one port (an NVLink egress, a NIC ingress, ...) with a capacity in bytes per
microsecond. A flow moves ``size`` bytes and crosses one or more links, each with a weight: the link time per byte of
the flow (a reduce that pulls equal tiles from 7 peers is one flow, weight 1 on its own ingress and 1/7 on each peer's
egress; per-message overhead makes a weight above 1). A flow may carry its own cap (what the SM moving it can drive).

Rates are max-min fair (weighted progressive filling): every flow's rate rises together until a link is full (its
flows freeze at that rate) or a flow reaches its cap (it freezes at the cap); the capacity that capped or
elsewhere-bottlenecked flows leave on a link goes to the others. No link carries more than its capacity, and no flow
can go faster without slowing one that is no faster than it.

Incremental: when flows start or end, only the flows the change can move are re-solved (:func:`maxmin.resolve`; in a
small network, their whole component: the flows and links reachable from the changed links through shared flows).
Flows elsewhere keep their rates and finish times.

Groups: flows with the same links, weights and cap always get the same max-min rate, so they are one :class:`Flow` (a
group) holding ``count`` of them, with ``count`` times the weight on each link: the solver rates groups, not flows.
Each member keeps its own size and start: the group tracks its *virtual time* (bytes every member has moved since the
group began), and a member ends when the virtual time passes its start plus its size. So a NIC carrying hundreds of
messages to a few peers re-solves a few groups, and a wave of identical NVLink copies is one.

Cost: each group's next finish sits in one heap with lazy deletion, and a single timer is armed for the earliest, so
the event count grows with the number of finishes, not with flows x re-rates. Re-solves are batched per instant: flows
that start or end at the same simulated time (a wave of tiles finishing together) mark their links, and one zero-delay
event re-solves every marked component once. No time passes in between, so no byte moves at a stale rate.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final, NamedTuple

import simpy

from .environment import CountingEnvironment, Entry, pop, push
from .maxmin import Solves, Weights, resolve

_BORN: Final = [0]  # groups made so far (Flow.born): an item, where itertools.count's next cost two lookups and a call
HEAP_SLACK = 4096  # superseded entries the heap may hold past twice its groups' count before _arm drops them
EPS_US: Final = 1e-9
WHOLE: Final = 2.0 ** 53  # float sums of whole numbers >= 0 below this are exact: the same bits in any grouping
INCREMENTAL_GROUPS = 256  # from this many live groups on, re-rate incrementally (maxmin.resolve); below, whole
# components as always, filled from scratch or found remembered (maxmin.Solves): the same rates, to the bit


class Link:
    """One direction of one port. ``samples`` records (time, total rate) when tracing.

    ``bytes``: the payload carried so far; ``busy_bytes``: payload plus per-message overhead, what occupies the link.
    Each is what was added to it (``added``, ``added_busy``) plus what the flows of whole-number plans owe it
    (``owed``: per plan, the flows started and each one's payload and busy bytes; :meth:`FlowNet.transfer_plan` counts
    flows there rather than adding per link). ``units``: its groups in the order they came, each one's weight per member
    (times its ``count``: :attr:`flows`), written as a group comes or goes (a weight per group was a write per start and
    end: the 2 x 8 every-node GEMM+AR's 56k transfers and 27k wake-ups, 60 M instructions)."""

    __slots__ = ("name", "capacity", "units", "weight", "added", "added_busy", "owed", "samples", "batch", "seen",
                 "reached", "fill_tag", "fill_seq", "fill_left", "fill_weight")  # (maxmin's working state)
    reached: int  # (set by maxmin.component where it tags the link, before it reads it)
    fill_seq: int  # (set by max_min where it tags the link, before it reads them)
    fill_left: float
    fill_weight: float

    def __init__(self, name: str, bytes_per_us: float) -> None:
        self.name = name
        self.capacity = bytes_per_us
        self.units: dict[Flow, float] = {}  # group -> weight per member; insertion-ordered, so runs are reproducible
        self.weight = 0.0  # total weight of the flows on the link
        self.added = self.added_busy = 0.0
        self.owed: list[tuple[list[int], float, float]] = []
        self.samples: list[tuple[float, float]] | None = None
        self.batch: object = None  # (the FlowNet batch that last marked the link: FlowNet._mark)
        self.seen: object = None  # (the search that last reached the link: maxmin.component)
        self.fill_tag: object = None  # (the max_min that last counted the link as one that can fill)

    @property
    def flows(self) -> Weights:  # (each group and its weight on the link)
        return Weights(self.units)

    # (while anything is owed, every amount on the link is a whole number and all together stay below WHOLE: these
    # sums are exact, the bits of the amounts added one by one in any order)
    @property
    def bytes(self) -> float:
        return self.added + sum(payload * flows[0] for flows, payload, _ in self.owed) if self.owed else self.added

    @property
    def busy_bytes(self) -> float:
        return self.added_busy + sum(busy * flows[0] for flows, _, busy in self.owed) if self.owed else self.added_busy


class Flow:
    """A group of flows with the same links, weights (``unit``: link -> weight of one flow) and cap, all moving at
    ``rate`` each. ``vtime``: bytes each member has moved since the group began, as of ``stamp`` (brought up to a
    later ``now`` as ``vtime += rate * (now - stamp)``, then ``stamp = now``: written out where it happens, the hot
    path); ``ends``: a heap of :class:`Entry` per transfer (its virtual end, its sequence number, (members, done
    event)); ``due``: the group's live entry in the network's heap of next finishes (one a re-rate replaced or a
    retired group's is left there, and skipped)."""

    __slots__ = ("links", "weights", "unit", "cap", "count", "vtime", "rate", "stamp", "due", "ends", "key", "born",
                 "shape", "batch", "seen")

    def __init__(self, unit: dict[Link, float], cap: float, now: float, key=None, shape: Shape | None = None) -> None:
        self.links = tuple(unit)  # (and weights: unit's keys and values, walked with zip, not a dict's items)
        self.weights = tuple(unit.values())
        self.unit = unit
        self.cap = cap
        self.count = 0
        self.vtime = self.rate = 0.0
        self.stamp = now
        self.due: Entry | None = None
        self.ends: list[Entry] = []
        self.key = key
        _BORN[0] = self.born = _BORN[0] + 1  # groups in the order made: each link's groups' order (maxmin.Solves)
        self.shape = shape  # (the plan key it is the live group of, in a FlowNet)
        self.batch: object = None  # (the FlowNet batch that last touched the group: FlowNet.touched)
        self.seen: object = None  # (the search that last reached the group: maxmin.component)

    def revive(self, now: float) -> Flow:
        """A retired group (no member, on no link) live from ``now`` again, as a new one would start."""
        self.count, self.vtime, self.rate, self.stamp, self.due, self.batch = 0, 0.0, 0.0, now, None, None
        _BORN[0] = self.born = _BORN[0] + 1
        return self

    def add(self, n: int) -> None:
        """``n`` more members (or fewer, for n < 0): ``count`` times the unit weight on every link."""
        before = self.count
        self.count = after = before + n
        if before == 0:  # (enters its links, or is on them from a start of no members: a write in place)
            weights: tuple = self.weights  # (items as the objects they are: no unboxing and boxing again)
            for link, unit in zip(self.links, weights):
                link.units[self] = unit
        for link, w in zip(self.links, self.weights):  # (w * before: what the link holds for it, to the bit)
            link.weight += w * after - w * before


class Shape:
    """A plan key (interned: :meth:`FlowNet.plan_legs`) and its live group, if any: a field read, where a dict
    by the key's id cost a hash and a boxed int; a retired one is kept (``spare``) to revive, not made anew."""

    __slots__ = ("key", "group", "spare")

    def __init__(self, key: tuple) -> None:
        self.key = key
        self.group: Flow | None = None
        self.spare: Flow | None = None


class Plan(NamedTuple):
    """:meth:`FlowNet.plan_legs`'s work (a tuple, as its callers keep it; compiled, each field read by
    its index): the flows' size, legs, unit weights, shape, flows counted (``owed``) and ``whole``."""

    size: float
    legs: tuple[tuple[Link, float, float], ...]
    unit: dict[Link, float]
    shape: Shape
    owed: list[int]
    whole: float


def _per_link(legs: list[tuple[Link, float, float]]) -> tuple[dict[Link, tuple[float, float]], float]:
    """Each link's legs summed into one (payload, busy) per flow, and the bytes all legs put on links per flow: inf
    unless every number is whole and >= 0 (only then may a plan's flows be counted rather than their bytes added)."""
    sums: dict[Link, tuple[float, float]] = {}
    for link, payload, busy in legs:
        was = sums.get(link, (0.0, 0.0))
        sums[link] = (was[0] + payload, was[1] + busy)
    whole = all(x >= 0 and float(x).is_integer() for _, payload, busy in legs for x in (payload, busy))
    return sums, sum(p + b for p, b in sums.values()) if whole else math.inf


def _group(entry: Entry) -> Flow:
    """The group an entry of the network's heap is the next finish of (typed: compiled, its fields are read
    directly; an entry's item is any object)."""
    return entry.item


class FlowNet:
    """Starts flows and fires each one's ``done`` event when its last byte has crossed."""

    def __init__(self, env: CountingEnvironment, record: bool = False) -> None:
        self.env = env
        self.record = record
        self.heap: list[Entry] = []  # groups' next finishes (Entry: the finish, seq, group), a heap
        self.seq = 0
        self.armed = math.inf
        self.batch = object()  # the ``batch`` of links in ``dirty`` and groups in ``touched`` (anew each flush)
        self.dirty: list[Link] = []  # links whose flows need a re-rate at this instant, each once
        self.touched: dict[Flow, None] = {}  # groups whose members changed at this instant
        self.flush_pending = False
        self.groups: dict[Shape, Flow] = {}  # the live group of each plan key (weights, cap), by its Shape
        self.keys: dict[tuple, Shape] = {}  # each plan key made, once: equal keys are one object (plan_legs)
        # bytes the links may still take as flows counted (transfer_plan, Link.owed): while every amount is whole and
        # all of them together stay below WHOLE, each link's totals are exact whichever way they are summed; -inf from
        # the first amount that is not (a link takes bytes from one net only: the model's links are its own)
        self.whole_left = WHOLE
        self.owing: dict[Link, None] = {}  # the links that plans' flows owe bytes
        self.events = 0  # live transfers that end with an event, not a call (_wake: none, no search)
        self.solves = Solves()  # whole components' rates by their state (below INCREMENTAL_GROUPS live groups)

    def transfer(self, nbytes: float, links: tuple[Link, ...], cap: float = math.inf) -> simpy.Event:
        """Move ``nbytes`` across every one of ``links`` (weight 1 each)."""
        return self.transfer_legs(nbytes, [(link, nbytes, nbytes) for link in links], cap)  # type: ignore

    def transfer_legs(self, size: float, legs: list[tuple[Link, float, float]], cap: float = math.inf,
                      count: int = 1, then: Callable[[None], None] | None = None) -> simpy.Event | None:
        """``count`` identical flows of ``size`` bytes each (the members of a group), one event at
        their end; each leg ``(link, payload, busy)`` puts ``busy`` bytes of link time (payload plus
        per-message overhead) and ``payload`` bytes of data on its link, per flow.

        With ``then``, no event: ``then(None)`` is called where the event's callback would be, or
        at once when the flows end at an instant with nothing else due (:meth:`_wake`)."""
        return self.transfer_plan(self.plan_legs(size, legs, cap), count, then)

    def plan_legs(self, size: float, legs: list[tuple[Link, float, float]], cap: float = math.inf) -> Plan:
        """What :meth:`transfer_legs` works out from its flows' shape alone (each link's weight per
        flow, the group's key), once: a simulator starts flows of one task's shape many times. Equal
        keys are one object (a :class:`Shape`'s), so a transfer finds its group through its plan
        (hashing a key hashes every (link, weight) pair of it)."""
        unit: dict[Link, float] = {}
        for link, _, busy in legs:
            unit[link] = unit.get(link, 0.0) + busy / size if size > 0 else 0.0
        key = (tuple(unit.items()), cap)
        shape = self.keys.get(key) or self.keys.setdefault(key, Shape(key))
        sums, whole = _per_link(legs)
        owed = [0]  # the flows of this plan counted, not added (transfer_plan)
        if whole < self.whole_left:
            for link, (payload, busy) in sums.items():
                link.owed.append((owed, payload, busy))
                self.owing[link] = None
        return Plan(size, tuple(legs), unit, shape, owed, whole)

    def transfer_plan(self, plan: Plan, count: int = 1,
                      then: Callable[[None], None] | None = None) -> simpy.Event | None:
        """:meth:`transfer_legs` of flows planned by :meth:`plan_legs`."""
        done = self.env.event() if then is None else then
        if plan.whole * count < self.whole_left:  # (every link's totals stay whole numbers below WHOLE)
            self.whole_left -= plan.whole * count
            plan.owed[0] += count  # the flows counted: their bytes are owed to their links (see Link)
        else:
            self._settle()
            for link, payload, busy in plan.legs:  # leg by leg from here on
                link.added += payload * count
                link.added_busy += busy * count
        if plan.size <= 0:
            self._succeed(done)
            return None if then is not None else done  # type: ignore
        if then is None:
            self.events += 1
        now = self.env.now
        shape = plan.shape
        group = shape.group
        if group is None:  # (its shape's retired group revived, or a new one)
            key = shape.key
            group = shape.group = shape.spare.revive(now) if shape.spare else Flow(plan.unit, key[1], now, key, shape)
            self.groups[shape] = group
        if now > group.stamp:  # (the group's vtime brought up to now: see Flow)
            group.vtime += group.rate * (now - group.stamp)
        group.stamp = now
        self.seq += 1
        push(group.ends, Entry(group.vtime + plan.size, self.seq, (count, done)))
        group.add(count)
        batch = self.batch
        if group.batch is not batch:  # (else its links are marked already: a group in ``touched`` has
            group.batch = batch  # all its links in ``dirty`` until the flush clears both)
            self.touched[group] = None
            self._mark(group.links)
        return None if then is not None else done  # type: ignore

    def _settle(self) -> None:
        """No more flows counted: what they owe each link is added to it (exact, see Link), once."""
        self.whole_left = -math.inf
        for link in self.owing:
            link.added, link.added_busy, link.owed = link.bytes, link.busy_bytes, []
        self.owing = {}

    def _succeed(self, done) -> None:
        """Trigger a transfer's end: its event, or its call scheduled as that event would be."""
        if isinstance(done, simpy.Event):
            done.succeed()
        else:
            self.env.call_later(0.0, done)

    def _mark(self, links: tuple[Link, ...]) -> None:
        """Re-rate the flows on ``links`` once, after everything else that happens at this instant."""
        batch, dirty = self.batch, self.dirty
        for link in links:
            if link.batch is not batch:
                link.batch = batch
                dirty.append(link)
        if not self.flush_pending:
            self.flush_pending = True
            self.env.call_later(0.0, self._flush)

    def _flush(self, _event) -> None:
        self.flush_pending = False
        links, self.dirty = self.dirty, []
        if not self.record and len(self.groups) >= INCREMENTAL_GROUPS:  # (a trace samples whole components)
            flows, rates = resolve(dict.fromkeys(links), self.touched)
        else:
            flows, rates = self.solves.resolve(links)
        self._rerate(flows, rates)
        self.touched.clear()
        self.batch = object()
        self._arm()

    def _rerate(self, flows: dict[Flow, None], rates: tuple[float, ...]) -> None:
        now, batch, heap = self.env.now, self.batch, self.heap
        for flow, rate in zip(flows, rates):
            if rate == flow.rate and flow.batch is not batch:
                continue  # its next finish, and its heap entry, still hold
            if now > flow.stamp:  # (its vtime brought up to now: see Flow)
                flow.vtime += flow.rate * (now - flow.stamp)
            flow.stamp = now
            flow.rate = rate
            self.seq += 1
            left = max(0.0, flow.ends[0].when - flow.vtime)
            flow.due = entry = Entry(now + left / rate if left else now, self.seq, flow)
            push(heap, entry)
        if self.record:
            for link in dict.fromkeys(link for flow in flows for link in flow.links):
                if link.samples is None:
                    link.samples = []
                link.samples.append((now, sum([f.rate * w for f, w in link.flows.items()])))

    def _arm(self) -> None:
        heap = self.heap
        if len(heap) > 2 * len(self.groups) + HEAP_SLACK:  # mostly superseded entries: drop them at once
            live = [entry for entry in heap if _group(entry).due is entry]
            heap = self.heap = []
            for entry in live:
                push(heap, entry)
        while heap and _group(heap[0]).due is not heap[0]:
            pop(heap)  # drop entries superseded by a re-rate
        if heap and heap[0].when < self.armed:
            at = self.armed = heap[0].when
            self.env.call_later(max(0.0, at - self.env.now), self._wake, at)

    def _wake(self, at: float) -> None:
        if at != self.armed:
            return  # an earlier wake-up was armed after this one
        self.armed = math.inf
        now = self.env.now
        done: list = []  # the ended transfers' events, or calls (transfer_legs' ``then``)
        changed: list[Flow] = []  # (each once: a group has one live entry in the heap)
        heap, due = self.heap, now + EPS_US
        while heap and heap[0].when <= due:
            entry = pop(heap)
            flow = _group(entry)
            if flow.due is not entry:
                continue
            if now > flow.stamp:  # (its vtime brought up to now: see Flow)
                flow.vtime += flow.rate * (now - flow.stamp)
            flow.stamp = now
            ends, ended = flow.ends, 0
            while ends and (not ended or ends[0].when - flow.vtime <= EPS_US * flow.rate):  # the due one,
                end: tuple[int, Any] = pop(ends).item  # and every other that ends within EPS_US of now
                n, event = end
                done.append(event)
                ended += n
            changed.append(flow)
            before = flow.count  # (flow.add(-ended) written out, and where no member is left, the
            flow.count = after = before - ended  # group leaving each link as its weight there drops)
            if ends:
                for link, w in zip(flow.links, flow.weights):
                    link.weight += w * after - w * before
            else:
                for link, w in zip(flow.links, flow.weights):
                    link.weight += w * after - w * before
                    del link.units[flow]
                    if not link.units:
                        link.weight = 0.0  # no drift from float sums
                flow.due = None  # retired: no heap entry of it counts any more
                if flow.shape is not None:  # (a group transfer_plan started: always)
                    del self.groups[flow.shape]
                    flow.shape.group, flow.shape.spare = None, flow
        # calls only, and nothing else due now: their events would be the next ones processed, each
        # call what it would do when processed (after the re-rate is scheduled, as events would be)
        events = 0
        if self.events:  # (else every transfer that ended has a call)
            events = sum(isinstance(d, simpy.Event) for d in done)
            self.events -= events
        at_once = not events and not self.env.due_now()
        for d in done if not at_once else []:  # (a list either way: iterated compiled)
            self._succeed(d)
        if self.record:
            for flow in changed:
                for link in flow.links:
                    if not link.units:
                        link.samples.append((now, 0.0))  # type: ignore[union-attr]
        if changed:
            batch, touched = self.batch, self.touched
            for flow in changed:
                if flow.ends and flow.batch is not batch:
                    flow.batch = batch
                    touched[flow] = None
                self._mark(flow.links)
        else:
            self._arm()
        for call in done if at_once else []:
            call(None)
