"""Weighted max-min fair rates of flows on links (progressive filling), and what a change re-rates.

Split from :mod:`flows` (which starts flows, tracks their ends and calls this): the solver and the
set of flows a change on some links can move.

Which flows a change can move: max-min couples flows through any shared link that can *bind*, and
a link binds only if its flows, all at their caps, would overfill it. A link whose capacity exceeds
the sum over its flows of weight x cap (with a margin far above float rounding) never fills in
progressive filling (levels only rise as flows freeze, and no flow passes its cap), so it freezes
no flow: dropping it from a solve leaves every rate as it was. The flows a change can move are those
reachable from the changed links through binding links only (:func:`affected`); a GB200 72-GPU
NVLink domain's copies, capped by the SM copy rate, fill most egresses but few ingresses, so this
re-solves a fraction of the domain per change instead of all of it.
"""
from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .flows import Flow, Link

SLACK = 1e-9  # a link binds unless capacity > demand at every cap x (1 + SLACK): far above float noise


def binds(link: Link) -> bool:
    """Whether ``link`` can fill: its flows, each at its cap, would use more than its capacity.
    An uncapped flow (or a 0-weight one, as 0 x inf is nan) makes it bind."""
    demand = 0.0
    for flow, w in link.flows.items():
        demand += w * flow.cap
    return not link.capacity > demand * (1 + SLACK)


def affected(links, prune: bool = True) -> tuple[dict[Flow, None], dict[Link, None] | None]:
    """The flows a change on ``links`` can re-rate, and the links that can bind them (None: all of
    their links). Every flow of a changed link, then every flow of a binding link of those, and so
    on; with ``prune`` off, through every link (the whole component: every flow sharing a link,
    directly or through other flows, with ``links``). Deterministic order (no hash-order iteration):
    a link's flows in the order they came, links as a stack from the last changed one."""
    flows: dict[Flow, None] = {}
    binding: dict[Link, None] = {}
    seen = dict.fromkeys(links)
    changed = set(seen)
    todo = list(seen)
    while todo:
        link = todo.pop()
        if prune:
            if binds(link):
                binding[link] = None
            elif link not in changed:
                continue  # never fills: its flows are not coupled through it
        for flow in link.flows:
            if flow not in flows:
                flows[flow] = None
                for other in flow.links:
                    if other not in seen:
                        seen[other] = None
                        todo.append(other)
    return flows, binding if prune else None


def max_min(flows: dict[Flow, None], binding: dict[Link, None] | None = None) -> dict[Flow, float]:
    """Weighted max-min fair rates of ``flows`` by progressive filling: raise the rate of every
    unfrozen flow together; the next event is a link filling up (its unfrozen flows freeze at that
    level) or a flow's cap (it freezes there).

    ``flows`` must hold every flow of every link in ``binding`` (by default, every link of
    ``flows``: then a whole component); links of ``flows`` outside ``binding`` are taken not to fill
    (:func:`binds`). With ``binding`` None this is the solve as it always was, to the bit.

    The links' fill levels (capacity left / unfrozen weight) sit in a heap, renewed only for the
    links of the flows that freeze, so a component with many distinct levels costs (flows x links
    per flow) log(links), not levels x links. Where every flow has one cap (an SM's copy rate: a
    component of NVLink copies), the caps need no sorted list: they all freeze at the first cap
    event, which ends the filling."""
    rates: dict[Flow, float] = {}
    order = dict.fromkeys([link for flow in flows for link in flow.links])
    left = {link: link.capacity for link in (order if binding is None else (x for x in order if x in binding))}
    active_w = {link: link.weight for link in left}  # weight of the unfrozen flows, for links not yet full
    version = dict.fromkeys(left, 0)
    heap = [(left[link] / w, i, link, 0) for i, (link, w) in enumerate(active_w.items()) if w > 0]
    heapq.heapify(heap)
    seq = len(heap)
    active = dict(flows)
    caps = {f.cap for f in flows}
    one_cap = caps.pop() if len(caps) == 1 else None  # then ``capped`` is never read
    capped = [] if one_cap is not None else sorted((f.cap, i, f) for i, f in enumerate(flows) if f.cap < math.inf)
    next_cap = 0  # capped[next_cap:] holds the caps of flows that may still be active
    while active:
        while heap and (heap[0][2] not in active_w or version[heap[0][2]] != heap[0][3]):
            heapq.heappop(heap)  # a full link's, or superseded by a freeze on the link
        level = heap[0][0] if heap else math.inf
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
            while heap and heap[0][0] <= level * (1 + 1e-12):
                _, _, link, ver = heapq.heappop(heap)
                if link in active_w and version[link] == ver:
                    full.append(link)
        if level == math.inf:  # flows on no finite link, uncapped: done at once
            rates.update(dict.fromkeys(active, math.inf))
            break
        frozen: dict[Flow, None] = {}
        if cap <= level * (1 + 1e-12) and one_cap is not None and cap < math.inf:
            frozen = dict(active)  # every active flow has this one cap
        elif cap <= level * (1 + 1e-12):
            for c, _, f in capped[next_cap:]:
                if c > level * (1 + 1e-12):
                    break
                if f in active:
                    frozen[f] = None
        for link in full:
            for f in link.flows:
                if f in active:
                    frozen[f] = None
        if len(frozen) == len(active):  # the last level (often the only one): no bookkeeping left to do
            rates.update((f, level if level < f.cap else f.cap) for f in frozen)
            break
        touched: dict[Link, None] = {}
        for flow in frozen:
            rate = level if level < flow.cap else flow.cap
            rates[flow] = rate
            del active[flow]
            for link in flow.links:
                if link not in left:
                    continue  # cannot fill: nothing to track
                w = link.flows[flow]
                rest = left[link] - w * rate
                left[link] = rest if rest > 0.0 else 0.0
                active_w[link] -= w
                touched[link] = None
        for link in full:
            del active_w[link]  # full: its flows are frozen
        for link in touched:
            if link in active_w:
                version[link] += 1
                w = active_w[link]
                if w > 0:
                    seq += 1
                    heapq.heappush(heap, (left[link] / w, seq, link, version[link]))
    return rates
