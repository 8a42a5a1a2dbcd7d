"""Weighted max-min fair rates of flows on links (progressive filling), and what a change re-rates.

Split from :mod:`flows` (which starts flows, tracks their ends and calls :func:`resolve`).

A change (flows starting or ending on some links) re-solved from scratch costs its whole component:
in a GB200 72-GPU NVLink domain running a MoE dispatch, ~900 flows on 144 ports, for each of
~33k changes. :func:`resolve` re-solves only what the change can move, exactly in real numbers
(floats may round differently: a different order of the same sums): the flows frozen below the
change's :func:`floor` keep their rates, and of the rest only those a changed link reaches through
links that can still fill. On that point it re-fills 232 flows per change on average (of 900; 148
of them change rate). A network of fewer groups re-solves each changed component whole, and
:class:`Solves` remembers those solves by their state: lanes in lockstep repeat theirs.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from .flows import Flow, Link

TIE: Final = 1e-12  # progressive filling's tie: levels this close (relative) freeze together
SLACK: Final = 1e-9  # of a link's capacity: the room a link must keep to count as never filling, far above rounding
SOLVES_KEPT = 4096  # whole-component solves a network remembers (Solves); the 2 x 8 every-node GEMM+AR has 278
SOLVES_TRIAL = 64  # after this many solves, a network that found under a tenth of them remembered stops remembering
SOLVES_FROM = 4  # groups a component needs to be remembered: a smaller one fills in about what its state costs


class Weights:
    """:attr:`Link.flows`: the link's groups and their weights there, read off its ``units`` (a view for a
    trace and tests: dropping a group drops it from the link). Kept here, beside the solver that reads the
    links' weights, where flows.py, the links' module, is at the 400-line limit."""

    __slots__ = ("units",)

    def __init__(self, units: dict[Flow, float]) -> None:
        self.units = units

    def __len__(self) -> int:
        return len(self.units)

    def __iter__(self) -> Iterator[Flow]:
        return iter(self.units)

    def __getitem__(self, flow: Flow) -> float:
        return self.units[flow] * flow.count

    def __delitem__(self, flow: Flow) -> None:
        del self.units[flow]

    def items(self) -> list[tuple[Flow, float]]:
        return [(flow, u * flow.count) for flow, u in self.units.items()]


def resolve(links: dict[Link, None], touched: dict[Flow, None]) -> tuple[dict[Flow, None], tuple[float, ...]]:
    """The flows a change on ``links`` can move (``touched``: the groups that started, ended members
    or are new there; every link of theirs is in ``links``), and their new max-min rates, in their
    order. (A network of fewer groups re-solves whole components instead: :meth:`Solves.resolve`.)

    Every other flow keeps its rate. Max-min rates are those of progressive filling, and below the
    level :func:`floor` gives, filling the changed network freezes the same flows at the same rates
    as filling it before the change did: the flows below it are *held*. The others are filled on
    what the held ones leave of each link, and of those only the ones a changed link reaches
    through links that can fill (the rest hold the same problem as before, so the same rates): a
    link cannot fill if what it has left exceeds its unheld flows' demand at their caps (levels
    only rise as flows freeze, and no flow passes its cap), so it couples nothing."""
    level = floor(links, touched)
    left: dict[Link, float] = {}  # what the held flows leave of each link that can fill

    def unheld(link: Link) -> list[Flow]:
        rest, demand, mine = link.capacity, 0.0, []
        for flow, u in link.units.items():
            w = u * flow.count
            if flow in touched or not flow.rate < level:
                demand += w * flow.cap  # nan for a 0-weight uncapped flow: then the link can fill
                mine.append(flow)
            else:
                rest -= w * flow.rate
        if not rest - demand > SLACK * link.capacity:
            left[link] = rest if rest > 0.0 else 0.0
        elif link not in links:
            return []  # cannot fill: its flows are not coupled through it
        return mine

    moved = _reach(links, unheld)
    return moved, _ordered(moved, max_min(moved, left))


class Solves:
    """Whole-component solves (every flow sharing a link, directly or through other flows, with the
    changed links, filled from scratch), remembered by everything
    :func:`max_min` reads of the component, so a component seen again in the same state is rated
    without filling: lanes that run in lockstep repeat their waves (the 2 x 8 every-node GEMM+AR
    run re-rates its NVLink component 3,390 times in 278 states).

    What a whole component's filling reads: each group's links, weight on each (its unit weight
    times its count) and cap, in the component's order (the group's interned plan key, ``Flow.key``,
    and its count); each link's capacity (fixed: the link is named by the keys), its weight (a float
    whose bits depend on the link's history: read as it is) and the order of its groups in
    ``Link.units``, which is the order the groups were made (a group enters its links when it is
    made and leaves them when it ends; ``Flow.born``), given here as the component's groups sorted
    by birth. Equal inputs, equal rates, to the bit: the filling is a function of them alone. (Plan
    keys are named by id: the network keeps every key it made, ``FlowNet.keys``, so no id is reused.)

    Only components of :data:`SOLVES_FROM` groups or more are remembered (a seeded 24-point sample of
    the scale-out sweep: 2,484 of its 2,799 lone groups found remembered, for 23 ms where their
    filling cost 0.7 ms). Where states rarely repeat (a MoE dispatch: 2,381 solves in 2,370 states,
    where the states cost 5-13% of the run; the sweep sample's 3,579 components of 20 groups or more,
    none found), the network stops remembering after :data:`SOLVES_TRIAL` solves; and a state is made
    only for groups met together before (their plan keys in that order), as only those can be found."""

    def __init__(self, kept: int = SOLVES_KEPT) -> None:
        self.kept = kept
        self.solved = self.found = 0  # solves, and those found remembered (up to the trial's end)
        self._orders: dict[tuple, list[Link]] = {}  # the links of a sequence of plan keys, in first-seen order
        self._rates: dict[tuple, tuple[float, ...]] = {}  # each state's rates, in the component's order

    def resolve(self, links: Iterable[Link]) -> tuple[dict[Flow, None], tuple[float, ...]]:
        """The whole component of ``links`` and its max-min rates, in the component's order."""
        flows = component(links)
        if self.kept <= 0 or len(flows) < SOLVES_FROM:
            return flows, _ordered(flows, max_min(flows))
        keys = tuple([id(flow.key) for flow in flows])  # (comprehensions: compiled, a native field read each)
        order = self._orders.get(keys)
        if order is None:  # groups not met together before: no state of theirs is remembered, none made
            if len(self._orders) < self.kept and all([flow.key is not None for flow in flows]):  # (a group made
                self._orders[keys] = list(dict.fromkeys([link for flow in flows for link in flow.links]))  # without
                # a plan has no key)
            return flows, _ordered(flows, max_min(flows))
        state = self._state(flows, keys, order)
        rates = self._rates.get(state)
        self.solved += 1
        if rates is not None:
            self.found += 1
            return flows, rates
        rates = _ordered(flows, max_min(flows))
        if len(self._rates) < self.kept:
            self._rates[state] = rates
        if self.solved == SOLVES_TRIAL and self.found * 10 < self.solved:  # (states rarely repeat: stop)
            self.kept, self._orders, self._rates = 0, {}, {}
        return flows, rates

    @staticmethod
    def _state(flows: dict[Flow, None], keys: tuple, order: list[Link]) -> tuple:
        """What the filling of ``flows`` (plan keys ``keys``, links ``order``) reads (see the class). The
        groups sorted by birth as ``born * n + i`` sorted (n groups, i each one's place): plain ints,
        where a sort by a key function calls it once a group; births differ, so these sort as the
        births do, and each one's place is what is left over of n."""
        n = len(flows)
        counts: list[int] = []
        ranked: list[int] = []
        for i, flow in enumerate(flows):
            counts.append(flow.count)
            ranked.append(flow.born * n + i)
        ranked.sort()
        return keys, tuple(counts), tuple([r % n for r in ranked]), tuple([link.weight for link in order])


def floor(links: dict[Link, None], touched: dict[Flow, None]) -> float:
    """A level below which filling the changed network (``links`` changed, ``touched`` groups
    changed) freezes the same flows at the same rates as filling it before the change did, given
    that every flow holds its rate from before (its max-min rate then): the lowest, over the
    changed links, of

    - the highest rate of an untouched flow on the link (before the change the link filled at no
      lower level, so no untouched flow froze on it below this), and
    - the level at which the link fills now if its untouched flows hold their rates up to that
      level and its touched ones rise to their caps;

    less a margin far above float rounding. A flow starting on an idle link costs nothing here."""
    level = math.inf
    for link in links:
        held: list[tuple[float, float]] = []  # (the rate the flow stops rising at, its weight)
        top = -math.inf  # the highest rate of an untouched flow
        for flow, u in link.units.items():
            w = u * flow.count
            if flow in touched:
                held.append((flow.cap, w))
            else:
                held.append((flow.rate, w))
                top = flow.rate if flow.rate > top else top
        if -math.inf < top < level:
            level = top
        held.sort(key=lambda vw: vw[0])
        used, rest = 0.0, sum(w for _, w in held)
        for v, w in held:
            if rest > 0 and (link.capacity - used) / rest <= v:
                level = min(level, (link.capacity - used) / rest)
                break
            used += w * v
            rest -= w
    return level * (1 - SLACK)


def component(links: Iterable[Link]) -> dict[Flow, None]:
    """The flows that share a link, directly or through other flows, with any of ``links``: those
    :func:`_reach` would find taking every flow of each link, in the same order (written out: a
    dict's keys, iterated compiled, where a call per link would give them as a list). A link counts
    the flows of it found (``reached``): where that is all of them, reading them again finds none."""
    tag = object()
    flows: dict[Flow, None] = {}
    todo = _start(links, tag)
    while todo:
        link = todo.pop()
        if link.reached == len(link.units):
            continue
        for flow in link.units:
            if flow.seen is not tag:
                flow.seen = tag
                flows[flow] = None
                for other in flow.links:
                    if other.seen is not tag:
                        other.seen = tag
                        other.reached = 0
                        todo.append(other)
                    other.reached += 1
    return flows


def _reach(links: Iterable[Link], follow: Callable[[Link], list[Flow]]) -> dict[Flow, None]:
    """The flows reached from ``links``: ``follow(link)`` (called once per link reached) gives the
    flows to take from a link, and every link of those is reached in turn. Deterministic order (no
    hash-order iteration): a stack of links from the last of ``links``, each link's flows in the
    order ``follow`` gives them. A link or flow reached carries this search's tag in its ``seen``
    field: a field compare, where a dict of those reached cost a hash each."""
    tag = object()
    flows: dict[Flow, None] = {}
    todo = _start(links, tag)
    while todo:
        link = todo.pop()
        for flow in follow(link):
            if flow.seen is not tag:
                flow.seen = tag
                flows[flow] = None
                for other in flow.links:
                    if other.seen is not tag:
                        other.seen = tag
                        todo.append(other)
    return flows


def _start(links: Iterable[Link], tag: object) -> list[Link]:
    """``links``, each once (the first time it comes), tagged as reached by the search of ``tag``."""
    todo: list[Link] = []
    for link in links:
        if link.seen is not tag:
            link.seen = tag
            link.reached = 0
            todo.append(link)
    return todo


def _ordered(flows: dict[Flow, None], rates: dict[Flow, float]) -> tuple[float, ...]:
    """``rates`` of ``flows``, in their order."""
    return tuple([rates[flow] for flow in flows])


def max_min(flows: dict[Flow, None], left: dict[Link, float] | None = None) -> dict[Flow, float]:
    """Weighted max-min fair rates of ``flows`` by progressive filling: raise the rate of every
    unfrozen flow together; the next event is a link filling up (its unfrozen flows freeze at that
    level) or a flow's cap (it freezes there).

    Without ``left``, ``flows`` is a whole component (every flow on their links is in it): the solve
    as it always was, to the bit. With ``left`` (what other flows, at rates held fixed, leave of
    each link that can fill), ``flows`` holds the rest of those links' flows, and their other links
    are taken not to fill (:func:`resolve` says when that holds).

    Each link not yet full keeps its capacity left and unfrozen weight on itself (``Link.fill_*``,
    marked as this solve's by ``fill_tag``: slot reads where dicts cost a hash each, on the loop
    that runs once per frozen flow and link), and its fill level in ``levels``, renewed only for
    the links of the flows that freeze; each event's level is the least of them (a component has
    tens of links: one C-level ``min`` a step costs less than a heap's pushes and stale pops). Links
    that fill together freeze their flows in the order of (level, when the level was set), the order
    a heap of them gave: every float sum runs in the order it always did. Where every flow has one
    cap (an SM's copy rate: a component of NVLink copies), the caps need no sorted list: they all
    freeze at the first cap event, which ends the filling.

    A flow that freezes at a level gets the level as its rate: it is never above an unfrozen flow's
    cap (the least such cap is an event), and a flow frozen by its cap within the tie gets the level,
    or its cap where the two are equal (the same number)."""
    rates: dict[Flow, float] = {}
    if not flows:
        return rates  # (the links' flows all ended)
    if left is None and len(flows) == 1:  # one group alone on its links (half the solves of a sweep): its
        (flow,) = flows  # rate is the least of its links' levels and its cap, as the filling below finds it
        level = math.inf
        for link in flow.links:
            w = link.weight
            if w > 0 and link.capacity / w < level:
                level = link.capacity / w
        return {flow: level if level < flow.cap else flow.cap}
    tag = object()  # this solve's: a link whose fill_tag is it is one that can fill, not yet full
    links: list[Link] = []  # (each once, in the order the flows' links come: the tag marks those listed)
    for flow in flows:
        for link in flow.links:
            if link.fill_tag is not tag and (left is None or link in left):
                link.fill_tag = tag
                links.append(link)
    for i, link in enumerate(links):
        link.fill_seq = i
        link.fill_left, link.fill_weight = (link.capacity, link.weight) if left is None else (left[link], 0.0)
    if left is not None:
        for flow in flows:
            for link, u in zip(flow.links, flow.weights):
                if link.fill_tag is tag:
                    link.fill_weight += u * flow.count
    levels = {link: link.fill_left / link.fill_weight for link in links if link.fill_weight > 0}
    seq = len(levels)
    active = dict(flows)
    caps = {f.cap for f in flows}
    one_cap = caps.pop() if len(caps) == 1 else None  # then ``capped`` is never read
    capped = [] if one_cap is not None else sorted((f.cap, i, f) for i, f in enumerate(flows) if f.cap < math.inf)
    next_cap = 0  # capped[next_cap:] holds the caps of flows that may still be active
    while True:
        level = min(levels.values()) if levels else math.inf
        if one_cap is not None:
            cap = one_cap
        else:
            while next_cap < len(capped) and capped[next_cap][2] not in active:
                next_cap += 1
            cap = capped[next_cap][0] if next_cap < len(capped) else math.inf
        full = []
        if cap <= level:
            level = cap
        else:
            tie = level * (1 + TIE)
            for link, at in levels.items():
                if at <= tie:
                    full.append(link)
            if len(full) > 1:
                full.sort(key=lambda link: (levels[link], link.fill_seq))
        if level == math.inf:  # flows on no finite link, uncapped: done at once
            for f in active:
                rates[f] = math.inf
            return rates
        if cap <= level * (1 + TIE) and one_cap is not None:  # every active flow has this one cap: the last level
            for f in active:
                rates[f] = level
            return rates
        frozen: list[Flow] = []
        if cap <= level * (1 + TIE):
            for c, _, f in capped[next_cap:]:
                if c > level * (1 + TIE):
                    break
                if f in active:
                    del active[f]
                    frozen.append(f)
        for link in full:
            link.fill_tag = None  # full: its flows freeze now, and nothing reads it again
            del levels[link]
            for f in link.units:
                if f in active:
                    del active[f]
                    frozen.append(f)
        for f in frozen:  # (each once: a flow leaves ``active`` as it freezes)
            rates[f] = level
        if not active:  # the last level (often the only one): no bookkeeping left to do
            return rates
        touched: dict[Link, None] = {}
        for flow in frozen:
            for link, u in zip(flow.links, flow.weights):
                if link.fill_tag is tag:  # (else full, or one that cannot fill: nothing to track)
                    w = u * flow.count
                    rest = link.fill_left - w * level
                    link.fill_left = rest if rest > 0.0 else 0.0
                    link.fill_weight -= w
                    touched[link] = None
        for link in touched:
            w = link.fill_weight
            if w > 0:
                seq += 1
                link.fill_seq = seq
                levels[link] = link.fill_left / w
            else:
                levels.pop(link, None)
