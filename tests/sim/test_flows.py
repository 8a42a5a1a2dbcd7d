"""Flow-level bandwidth sharing (sim/flows.py): weighted max-min fair rates, re-solved per component.

The properties that define max-min fairness are checked on random networks: no link over its
capacity, and every flow either at its cap or crossing a full link on which no flow is faster.
A hand-made case shows the redistribution a bottleneck-only share (the model before) misses.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from mkernel.sim.flows import Flow, FlowNet, Link
from mkernel.sim.maxmin import max_min
from mkernel.sim.environment import CountingEnvironment


def _flows(spec: list[tuple[list[tuple[Link, float]], float]]) -> dict[Flow, None]:
    """Flows from (legs [(link, weight)], cap), registered on their links as FlowNet does."""
    out = {}
    for legs, cap in spec:
        f = Flow(dict(legs), cap, 0.0)
        f.add(1)
        out[f] = None
    return out


def test_capacity_left_by_a_flow_bottlenecked_elsewhere_goes_to_the_others():
    """f1 on A alone; f2 on A and B; f3 on B. B (4) holds f2 and f3 at 2 each, so A (10) gives f1
    the remaining 8. A bottleneck share alone would give f1 half of A (5) and leave 3 idle."""
    a, b = Link("A", 10.0), Link("B", 4.0)
    f1, f2, f3 = _flows([([(a, 1.0)], math.inf), ([(a, 1.0), (b, 1.0)], math.inf), ([(b, 1.0)], math.inf)])
    rates = max_min({f1: None, f2: None, f3: None})
    assert (rates[f1], rates[f2], rates[f3]) == pytest.approx((8.0, 2.0, 2.0))


def test_a_capped_flow_leaves_its_share_to_the_others_and_finish_times_follow():
    """Three flows of 60 bytes on one 30 B/us link, one capped at 2 B/us: the other two run at 14,
    finish at 60/14 us; then the capped one stays at its cap."""
    env = CountingEnvironment()
    net = FlowNet(env)
    link = Link("L", 30.0)
    done = [net.transfer(60.0, (link,)), net.transfer(60.0, (link,)), net.transfer(60.0, (link,), cap=2.0)]
    times = {}
    for i, ev in enumerate(done):
        ev.callbacks.append(lambda _e, i=i: times.__setitem__(i, env.now))
    env.run()
    assert times[0] == pytest.approx(60 / 14) and times[1] == pytest.approx(60 / 14)
    assert times[2] == pytest.approx(30.0)  # 60 bytes at 2 B/us, the cap, all along


def test_a_transfers_call_runs_where_its_events_callback_would():
    """``then``: called at once where nothing else is due at that instant, else scheduled as the
    event would be; either way the calls, and what they schedule, keep the events' order."""
    def run(calls: bool) -> list:
        env, log = CountingEnvironment(), []
        net, link = FlowNet(env), Link("L", 30.0)

        def ended(name):
            def note(_ev) -> None:
                log.append((env.now, name))
                env.call_later(1.0, lambda _a: log.append((env.now, name + " later")))
            return note

        def start(_a) -> None:  # at t=2: a timer due where two flows end (set after their wake-up), and
            # a flow that ends alone
            env.call_later(0.0, lambda _a: env.call_later(6.0, lambda _b: log.append((env.now, "timer"))))
            for name, size in (("b", 60.0), ("c", 60.0), ("d", 90.0)):
                done = net.transfer_legs(size, [(link, size, size)], then=ended(name) if calls else None)
                if not calls:
                    done.callbacks.append(ended(name))
        env.call_later(2.0, start)
        env.run()
        return log

    # 10 B/us each until b and c end at 8, with the timer due then (so scheduled: it comes first);
    # d's last 30 bytes at 30 B/us end at 9, after the two later timers set at 8 (d alone: called at once)
    assert run(True) == run(False) == [(8.0, "timer"), (8.0, "b"), (8.0, "c"), (9.0, "b later"),
                                       (9.0, "c later"), (9.0, "d"), (10.0, "d later")]


def test_weights_count_link_time_per_byte():
    """A flow with weight 2 on a link (per-message overhead doubling its link time) uses twice the
    capacity per unit of rate: with a weight-1 flow on a 30 B/us link, both run at 10."""
    link = Link("L", 30.0)
    f1, f2 = _flows([([(link, 2.0)], math.inf), ([(link, 1.0)], math.inf)])
    rates = max_min({f1: None, f2: None})
    assert rates[f1] == pytest.approx(10.0) and rates[f2] == pytest.approx(10.0)


@pytest.mark.parametrize("seed", range(40))
def test_random_networks_get_feasible_max_min_rates(seed):
    rng = np.random.default_rng(seed)
    links = [Link(f"l{i}", float(rng.uniform(1, 100))) for i in range(int(rng.integers(1, 8)))]
    spec = []
    for _ in range(int(rng.integers(1, 25))):
        on = rng.choice(len(links), size=int(rng.integers(1, min(4, len(links)) + 1)), replace=False)
        cap = float(rng.uniform(0.5, 60)) if rng.random() < 0.3 else math.inf
        spec.append(([(links[i], float(rng.choice([1.0, 1.0, 0.25, 1.5]))) for i in on], cap))
    flows = _flows(spec)
    rates = max_min(flows)
    assert set(rates) == set(flows)
    for link in links:
        used = sum(rates[f] * w for f, w in link.flows.items())
        assert used <= link.capacity * (1 + 1e-9)
    for f in flows:
        if rates[f] >= f.cap * (1 - 1e-9):
            continue
        bottleneck = [link for link in f.links
                      if sum(rates[g] * w for g, w in link.flows.items()) >= link.capacity * (1 - 1e-9)
                      and all(rates[g] <= rates[f] * (1 + 1e-9) for g in link.flows)]
        assert bottleneck, f"flow on {[link.name for link in f.links]} at {rates[f]} has no bottleneck"


def _oracle(transfers, capacity: dict[str, float]) -> list[float]:
    """Finish times of ``transfers`` (start, size, [(link, weight)], cap), one flow each, by brute
    force: at every start or finish, the max-min rates of every active flow, from scratch."""
    t, left, out = 0.0, {}, [math.nan] * len(transfers)
    pending = sorted(range(len(transfers)), key=lambda i: transfers[i][0])
    while pending or left:
        links = {name: Link(name, cap) for name, cap in capacity.items()}
        flows = {}
        for i in left:
            f = Flow({links[name]: w for name, w in transfers[i][2]}, transfers[i][3], t)
            f.add(1)
            flows[f] = i
        rates = {flows[f]: r for f, r in max_min(dict.fromkeys(flows)).items()}
        nxt = min((t + left[i] / rates[i] for i in left), default=math.inf)
        start = transfers[pending[0]][0] if pending else math.inf
        step = min(nxt, start)
        for i in list(left):
            left[i] -= rates[i] * (step - t)
            if left[i] <= 1e-9 * transfers[i][1]:
                out[i] = step
                del left[i]
        t = step
        while pending and transfers[pending[0]][0] <= t:
            i = pending.pop(0)
            left[i] = transfers[i][1]
    return out


@pytest.mark.parametrize("seed", range(25))
def test_grouped_flows_finish_when_one_flow_each_would(seed):
    """Transfers arriving over time on a few links, many on the same links (so they share a group):
    the grouped solver's finish times equal a from-scratch max-min of every flow at every event."""
    rng = np.random.default_rng(seed)
    capacity = {f"l{i}": float(rng.uniform(5, 50)) for i in range(int(rng.integers(2, 5)))}
    paths = []
    for _ in range(int(rng.integers(1, 5))):  # a few distinct paths, so flows repeat them
        on = rng.choice(len(capacity), size=int(rng.integers(1, len(capacity) + 1)), replace=False)
        paths.append(([(f"l{i}", float(rng.choice([1.0, 0.5, 1.25]))) for i in on],
                      float(rng.uniform(2, 30)) if rng.random() < 0.3 else math.inf))
    transfers = []
    for _ in range(int(rng.integers(2, 30))):
        legs, cap = paths[int(rng.integers(len(paths)))]
        transfers.append((float(rng.choice([0.0, 1.0, 2.5]) + rng.integers(0, 3)), float(rng.uniform(5, 200)), legs, cap))
    env = CountingEnvironment()
    net = FlowNet(env)
    links = {name: Link(name, cap) for name, cap in capacity.items()}
    got = [math.nan] * len(transfers)

    def start(i):
        at, size, legs, cap = transfers[i]
        yield env.timeout(at)
        done = net.transfer_legs(size, [(links[name], size, size * w) for name, w in legs], cap)
        yield done
        got[i] = env.now

    for i in range(len(transfers)):
        env.process(start(i))
    env.run()
    assert got == pytest.approx(_oracle(transfers, capacity), rel=1e-9)
    assert len(net.groups) == 0 and all(not link.flows for link in links.values())


def test_dropping_superseded_heap_entries_changes_no_finish(monkeypatch):
    """The heap of next finishes drops superseded entries at once when they pile up (``HEAP_SLACK``):
    with it dropping them at every re-rate, 60 staggered transfers on three links end at the same times."""
    from mkernel.sim import flows

    def run() -> tuple[list, bool]:
        env, log = CountingEnvironment(), []
        net, links = FlowNet(env), [Link(f"L{i}", 10.0 + i) for i in range(3)]
        first = net.heap  # (a compaction makes a new heap: so the test sees the path was taken)
        rng = np.random.default_rng(7)
        for k in range(60):
            legs = [(links[j], 1.0 + j / 4) for j in sorted(set(rng.integers(0, 3, size=2).tolist()))]
            size = float(rng.integers(5, 50))

            def start(_a, legs=legs, size=size, k=k) -> None:
                done = net.transfer_legs(size, [(link, size * w, size * w) for link, w in legs])
                done.callbacks.append(lambda _e: log.append((env.now, k)))
            env.call_at(float(rng.integers(0, 30)) / 4, start)
        env.run()
        return log, net.heap is not first

    kept, compacted = run()
    assert not compacted and len(kept) == 60
    monkeypatch.setattr(flows, "HEAP_SLACK", -10**9)  # (every _arm drops them)
    assert run() == (kept, True)
