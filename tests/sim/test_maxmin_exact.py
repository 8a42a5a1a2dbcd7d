"""max_min (sim/maxmin.py) against the heap-based filling it replaced (as of 71524a0), bit for bit.

The filling keeps each link's fill level in a dict and takes the least, where it kept them in a
heap; links that fill at the same level (within the tie) must still freeze their flows in the heap's
order, or the float sums of what each link has left run in another order and rates move in their
last bits. Seeded random networks with many ties (few distinct capacities and weights), one cap or
several or none, whole components and filled on what held flows leave (``left``); the rates must
be equal (==) and in the same order. A reference with the heap's tie order reversed must differ,
so the check can fail.
"""
from __future__ import annotations

import heapq
import math

import numpy as np
import pytest

from mkernel.sim.flows import Flow, Link
from mkernel.sim.maxmin import TIE, max_min


def heap_max_min(flows: dict[Flow, None], left: dict[Link, float] | None = None, tie_sign: int = 1) -> dict[Flow, float]:
    """The filling as it was (71524a0), but for ``tie_sign``: -1 reverses the order of equal levels
    (a planted bug)."""
    rates: dict[Flow, float] = {}
    if not flows:
        return rates
    order = dict.fromkeys([link for flow in flows for link in flow.links])
    if left is None:
        left = {link: link.capacity for link in order}
        active_w = {link: link.weight for link in left}
    else:
        left = {link: left[link] for link in order if link in left}
        active_w = dict.fromkeys(left, 0.0)
        for flow in flows:
            for link in flow.links:
                if link in active_w:
                    active_w[link] += link.flows[flow]
    version = dict.fromkeys(left, 0)
    heap = [(left[link] / w, tie_sign * i, link, 0) for i, (link, w) in enumerate(active_w.items()) if w > 0]
    heapq.heapify(heap)
    seq = len(heap)
    active = dict(flows)
    capped = sorted((f.cap, i, f) for i, f in enumerate(flows) if f.cap < math.inf)
    next_cap = 0
    while active:
        while heap and (heap[0][2] not in active_w or version[heap[0][2]] != heap[0][3]):
            heapq.heappop(heap)
        level = heap[0][0] if heap else math.inf
        while next_cap < len(capped) and capped[next_cap][2] not in active:
            next_cap += 1
        cap = capped[next_cap][0] if next_cap < len(capped) else math.inf
        full = []
        if cap <= level:
            level = cap
        else:
            while heap and heap[0][0] <= level * (1 + TIE):
                _, _, link, ver = heapq.heappop(heap)
                if link in active_w and version[link] == ver:
                    full.append(link)
        if level == math.inf:
            rates.update(dict.fromkeys(active, math.inf))
            break
        frozen: dict[Flow, None] = {}
        if cap <= level * (1 + TIE):
            for c, _, f in capped[next_cap:]:
                if c > level * (1 + TIE):
                    break
                if f in active:
                    frozen[f] = None
        for link in full:
            for f in link.flows:
                if f in active:
                    frozen[f] = None
        for flow in frozen:
            rate = level if level < flow.cap else flow.cap
            rates[flow] = rate
            del active[flow]
            for link in flow.links:
                if link not in left:
                    continue
                w = link.flows[flow]
                rest = left[link] - w * rate
                left[link] = rest if rest > 0.0 else 0.0
                active_w[link] -= w
        for link in full:
            del active_w[link]
        for link in dict.fromkeys(link for flow in frozen for link in flow.links):
            if link in active_w:
                version[link] += 1
                w = active_w[link]
                if w > 0:
                    seq += 1
                    heapq.heappush(heap, (left[link] / w, tie_sign * seq, link, version[link]))
    return rates


def network(seed: int) -> tuple[dict[Flow, None], dict[Link, float]]:
    """Random groups on shared links (few distinct capacities and weights, so levels tie), with
    one cap, several or none; every other network a crossbar (each GPU's egress and ingress, groups
    between pairs: the sweep's NVLink components, where links fill together); and a ``left`` for
    some of the links (what held flows would leave)."""
    rng = np.random.default_rng(seed)
    mode = rng.choice(["one", "mixed", "none"])
    one = float(rng.choice([2.0, 3.0, rng.uniform(0.5, 20)]))

    def cap() -> float:
        return one if mode == "one" else math.inf if mode == "none" or rng.random() < 0.5 else float(
            rng.choice([one, rng.uniform(0.5, 20)]))

    if seed % 2:
        gpus = int(rng.integers(3, 9))
        outs, ins = [Link(f"out{g}", 9.0) for g in range(gpus)], [Link(f"in{g}", 9.0) for g in range(gpus)]
        links = outs + ins
        pairs = [(outs[s], ins[d]) for s in range(gpus) for d in range(gpus) if s != d and rng.random() < 0.8]
        legs = [dict.fromkeys(pair, float(rng.choice([1.0, 1.0, 1.1, 1 / 3]))) for pair in pairs]
    else:
        links = [Link(f"l{i}", float(rng.choice([10.0, 10.0, 30.0, 7.0, rng.uniform(1, 50)])))
                 for i in range(int(rng.integers(2, 14)))]
        legs = [{links[i]: float(rng.choice([1.0, 1.0, 0.1, 0.3, 1 / 7, 2.0, 1.25]))
                 for i in rng.choice(len(links), size=int(rng.integers(1, min(4, len(links)) + 1)), replace=False)}
                for _ in range(int(rng.integers(2, 40)))]
    flows: dict[Flow, None] = {}
    for unit in legs:
        flow = Flow(unit, cap(), 0.0)
        flow.add(int(rng.integers(1, 4)))
        flows[flow] = None
    left = {link: link.capacity * float(rng.choice([1.0, 0.5, rng.uniform(0, 1)])) for link in links if rng.random() < 0.7}
    return flows, left


def same(a: dict[Flow, float], b: dict[Flow, float]) -> bool:
    """The same rates to the bit, in the same order."""
    return [(f, v.hex()) for f, v in a.items()] == [(f, v.hex()) for f, v in b.items()]


@pytest.mark.parametrize("seed", range(300))
def test_rates_equal_the_heap_fillings_to_the_bit(seed):
    flows, left = network(seed)
    assert same(max_min(flows), heap_max_min(flows))
    assert same(max_min(flows, left), heap_max_min(flows, left))


def test_the_check_can_fail():
    """The heap's tie order reversed: some network's rates move (the ties are exercised)."""
    assert any(not same(heap_max_min(flows), heap_max_min(flows, tie_sign=-1))
               for flows, _ in map(network, range(300)))
