"""The incremental re-rate (sim/maxmin.py ``resolve``) against max-min from scratch.

After every re-rate of a running FlowNet, every live group's rate must equal what plain progressive
filling (a short reference below, independent of the solver's heap and its held flows) gives for
all live groups at once. Random networks with random starts and ends, groups and caps, and the
shape of a GB200 NVLink domain's MoE dispatch (two-leg copies across a crossbar, one SM cap). A
deliberately wrong floor level must fail the same check.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import mkernel.sim.flows as flows
import mkernel.sim.maxmin as maxmin
from mkernel.sim.flows import Flow, FlowNet, Link
from mkernel.sim.maxmin import TIE
from mkernel.sim.environment import CountingEnvironment



@pytest.fixture(autouse=True)
def incremental(monkeypatch):
    """Every re-rate incremental, however few the groups (FlowNet's default: from 256 on)."""
    monkeypatch.setattr(flows, "INCREMENTAL_GROUPS", 0)


def reference(flows: list[Flow]) -> dict[Flow, float]:
    """Weighted max-min rates by progressive filling, plainly: every step, the lowest of every
    link's fill level (capacity left / unfrozen weight) and every unfrozen flow's cap; the flows
    on links at that level, or capped there, freeze."""
    links = list(dict.fromkeys(link for f in flows for link in f.links))
    rate: dict[Flow, float] = {}
    active = list(flows)

    def fill(link: Link) -> float:
        used = sum(w * rate[g] for g, w in link.flows.items() if g in rate)
        weight = sum(w for g, w in link.flows.items() if g not in rate)
        return (link.capacity - used) / weight if weight > 0 else math.inf

    while active:
        levels = {link: fill(link) for link in links}
        level = min([*levels.values(), *(f.cap for f in active)])
        if level == math.inf:
            rate.update(dict.fromkeys(active, math.inf))
            break
        for f in [f for f in active if f.cap <= level * (1 + TIE)
                  or any(levels[link] <= level * (1 + TIE) for link in f.links)]:
            rate[f] = min(level, f.cap)
            active.remove(f)
    return rate


class Checked(FlowNet):
    """A FlowNet that, after every re-rate, compares every live group's rate with
    :func:`reference` over all of them; ``worst`` is the largest relative gap seen."""

    def __init__(self, env: CountingEnvironment) -> None:
        super().__init__(env)
        self.worst = 0.0
        self.solves = 0

    def _flush(self, event) -> None:
        super()._flush(event)
        groups = list(self.groups.values())
        want = reference(groups)
        self.solves += 1
        for g in groups:
            if g.rate != want[g]:
                self.worst = max(self.worst, abs(g.rate - want[g]) / want[g])


def run(transfers, links: dict[str, Link]) -> Checked:
    """Start ``transfers`` (start, size, [(link name, weight)], cap, count) on a Checked net; run."""
    env = CountingEnvironment()
    net = Checked(env)

    def start(at, size, legs, cap, count):
        yield env.timeout(at)
        yield net.transfer_legs(size, [(links[name], size, size * w) for name, w in legs], cap, count)

    for t in transfers:
        env.process(start(*t))
    env.run()
    assert not net.groups and all(not link.flows for link in links.values())
    return net


def random_network(seed: int) -> tuple[list, dict[str, Link]]:
    """A few links, a few paths (shared, so flows group), caps on some (or one cap on all), many
    transfers starting on a coarse time grid (so several start or end at once)."""
    rng = np.random.default_rng(seed)
    links = {f"l{i}": Link(f"l{i}", float(rng.uniform(5, 50))) for i in range(int(rng.integers(3, 9)))}
    one_cap = float(rng.uniform(2, 15)) if rng.random() < 0.3 else None
    paths = []
    for _ in range(int(rng.integers(2, 9))):
        on = rng.choice(len(links), size=int(rng.integers(1, 4)), replace=False)
        cap = one_cap or (float(rng.uniform(1, 20)) if rng.random() < 0.4 else math.inf)
        paths.append(([(f"l{i}", float(rng.choice([1.0, 0.5, 1.25, 2.0]))) for i in on], cap))
    transfers = []
    for _ in range(int(rng.integers(10, 50))):
        legs, cap = paths[int(rng.integers(len(paths)))]
        transfers.append((float(rng.integers(0, 12)) * 0.5, float(rng.uniform(5, 100)), legs, cap,
                          int(rng.integers(1, 4))))
    return transfers, links


def crossbar(seed: int, gpus: int = 8) -> tuple[list, dict[str, Link]]:
    """The GB200 MoE point's shape, scaled down: every GPU copies to distinct peers at once, each
    copy one flow on its egress and its peer's ingress (weight 1: per-message overhead included),
    all capped at the SM copy rate, which a link carries about four times (the point: 16 times)."""
    rng = np.random.default_rng(seed)
    links = {f"{d}{g}": Link(f"{d}{g}", 900.0) for g in range(gpus) for d in ("out", "in")}
    transfers = []
    for src in range(gpus):
        for _ in range(int(rng.integers(4, 9))):
            dst = int(rng.choice([g for g in range(gpus) if g != src]))
            transfers.append((float(rng.integers(0, 20)) * 0.05, float(rng.uniform(50, 400)),
                              [(f"out{src}", 1.0), (f"in{dst}", 1.0)], 225.0, 1))
    return transfers, links


@pytest.mark.python_core
@pytest.mark.parametrize("seed", range(30))
def test_every_rerate_equals_max_min_from_scratch_on_random_networks(seed):
    net = run(*random_network(seed))
    assert net.solves > 0 and net.worst < 1e-9


@pytest.mark.python_core
@pytest.mark.parametrize("seed", range(4))
def test_every_rerate_equals_max_min_from_scratch_on_the_moe_crossbar(seed):
    net = run(*crossbar(seed))
    assert net.solves > 20 and net.worst < 1e-9


@pytest.mark.python_core
@pytest.mark.parametrize("wrong", ["floor 1% high", "floor blind to the new flows"])
def test_a_wrong_floor_is_caught(wrong, monkeypatch):
    """The check above can fail: holding flows a little above the true floor, or working the floor
    out without the demand of the flows that just started, gives rates off max-min."""
    floor = maxmin.floor
    if wrong == "floor 1% high":
        monkeypatch.setattr(maxmin, "floor", lambda links, touched: floor(links, touched) * 1.01)
    else:
        monkeypatch.setattr(maxmin, "floor", lambda links, touched: floor(links, {}))
    worst = max(run(*crossbar(seed)).worst for seed in range(4))
    assert worst > 1e-3


@pytest.mark.parametrize("seed", range(10))
def test_one_group_alone_is_rated_as_the_filling_rates_it(seed):
    """max_min's shortcut for one group alone on its links (half the solves of a sweep) against the
    filling itself: the same group solved beside a second one on a link of its own, far above any
    level here (so the filling runs, and the second group neither ties nor freezes first), bit for
    bit. Groups on no link, on links of no weight, capped or not."""
    rng = np.random.default_rng(seed)
    for _ in range(200):
        unit = {Link(f"l{j}", float(rng.choice([1.0, 3.0, rng.uniform(0.1, 100.0)]))):
                float(rng.choice([0.0, 1.0, rng.uniform(0.1, 4.0)])) for j in range(int(rng.integers(0, 4)))}
        group = Flow(unit, float(rng.choice([math.inf, 2.0, rng.uniform(0.01, 50.0)])), 0.0)
        group.add(int(rng.integers(1, 4)))
        far = Flow({Link("far", 1e12): 1.0}, math.inf, 0.0)
        far.add(1)
        alone, beside = maxmin.max_min({group: None}), maxmin.max_min({group: None, far: None})
        assert alone[group] == beside[group], (seed, [(link.capacity, w) for link, w in unit.items()], group.cap)
