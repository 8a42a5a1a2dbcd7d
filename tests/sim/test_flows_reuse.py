"""The flow network's shortcuts (sim/flows.py, sim/maxmin.py) against their plain forms, bit for bit.

A retired group's object revived by its shape's next transfer, where a new one was made: every group's
rate after every re-rate and every transfer's end the same as with every group made anew, on waves of
copies whose groups retire and come back. The component search that skips a link whose flows it has
all found, against a search that reads every link (its order too). The solve state's birth order
(births sorted as plain ints) against a sort by a key function.
"""
from __future__ import annotations

import math
import random

import numpy as np
import pytest

from mkernel.sim.environment import CountingEnvironment
from mkernel.sim.flows import Flow, FlowNet, Link
from mkernel.sim.maxmin import Solves, component


def _transfers(seed: int) -> tuple[list, dict[str, Link]]:
    """Copies between four GPUs on six paths (weights 1 and 1/3, two caps), in seeded waves: most of a
    wave's groups end before the next starts (retired, then revived), some overlap; counts 1-3."""
    rng = np.random.default_rng(seed)
    links = {f"{d}{g}": Link(f"{d}{g}", 90.0) for g in range(4) for d in ("out", "in")}
    paths = [([(f"out{s}", 1.0), (f"in{(s + k) % 4}", 1.0 if k == 1 else 1 / 3)], 25.0 if k == 1 else math.inf)
             for s in range(4) for k in (1, 2) if s + k < 6]
    transfers = []
    for wave in range(12):
        for _ in range(int(rng.integers(2, 8))):
            legs, cap = paths[int(rng.integers(len(paths)))]
            transfers.append((wave * float(rng.choice([3.0, 8.0])) + 0.25 * int(rng.integers(0, 3)),
                              float(rng.uniform(10, 60)), legs, cap, int(rng.integers(1, 4))))
    return transfers, links


class _Fresh(FlowNet):
    """A network that makes every group anew (its shapes keep no retired group to revive)."""

    def _wake(self, at: float) -> None:
        super()._wake(at)
        for shape in self.keys.values():
            shape.spare = None


def _run(net_type: type, seed: int) -> tuple[list, list, int]:
    """Every live group's (key, count, rate, vtime) after every re-rate, every transfer's end, and how
    many groups were revived, on a net of ``net_type``."""
    env, seen, ends = CountingEnvironment(), [], []
    transfers, links = _transfers(seed)
    revived = []

    class Net(net_type):  # type: ignore[misc, valid-type]
        def _flush(self, event) -> None:
            super()._flush(event)
            for link in links.values():  # (what maxmin.Solves reads as the groups' births)
                assert [g.born for g in link.flows] == sorted(g.born for g in link.flows)
            seen.append([(tuple((link.name, w) for link, w in g.key[0]), g.key[1], g.count, g.rate.hex(), g.vtime.hex())
                         for g in self.groups.values()])

        def transfer_plan(self, plan, count=1, then=None):
            shape = plan.shape
            if shape.group is None and shape.spare is not None:
                revived.append(shape.spare)
            return super().transfer_plan(plan, count, then)

    net = Net(env)

    def start(at, size, legs, cap, count):
        yield env.timeout(at)
        yield net.transfer_legs(size, [(links[name], size, size * w) for name, w in legs], cap, count)
        ends.append((env.now.hex(), size))

    for t in transfers:
        env.process(start(*t))
    env.run()
    assert not net.groups and all(not link.flows for link in links.values())
    return seen, ends, len(revived)


@pytest.mark.python_core
@pytest.mark.parametrize("seed", range(12))
def test_a_revived_group_runs_as_a_group_made_anew(seed):
    """And each link's groups in the order of their births, as whole-component states read them.
    (Planted and caught: a revived group keeping its old virtual time, its old rate and time stamp, or
    its birth.)"""
    fresh = _run(_Fresh, seed)
    kept = _run(FlowNet, seed)
    assert fresh[2] == 0 and kept[2] > 0
    assert kept[:2] == fresh[:2]


def _plain_component(links) -> list[Flow]:
    """The search as it was: every link reached has its flows read, the reached ones kept in dicts."""
    flows: dict[Flow, None] = {}
    seen = dict.fromkeys(links)
    todo = list(seen)
    while todo:
        link = todo.pop()
        for flow in link.flows:
            if flow not in flows:
                flows[flow] = None
                for other in flow.links:
                    if other not in seen:
                        seen[other] = None
                        todo.append(other)
    return list(flows)


@pytest.mark.parametrize("seed", range(200))
def test_the_component_search_finds_what_reading_every_link_finds(seed):
    """Random groups on a few links (some on links of weight 0, some alone): from random starting
    links (repeated, in random order), the same flows in the same order. (Planted and caught: a link
    skipped one flow early, a link's count not reset for a new search.)"""
    rng = random.Random(seed)
    links = [Link(f"l{i}", 1.0) for i in range(rng.randint(1, 12))]
    for _ in range(rng.randint(0, 30)):
        flow = Flow({link: rng.choice([0.0, 1.0, 0.5]) for link in rng.sample(links, rng.randint(1, min(4, len(links))))},
                    math.inf, 0.0)
        flow.add(rng.randint(1, 3))
    for _ in range(4):  # (searches one after another: each link's count is this search's)
        start = [rng.choice(links) for _ in range(rng.randint(1, 5))]
        assert list(component(start)) == _plain_component(start)


@pytest.mark.parametrize("seed", range(100))
def test_the_birth_order_of_a_state_is_the_sort_by_birth(seed):
    """(Planted and caught: the places read as the quotient, or births sorted the wrong way.)"""
    rng = random.Random(seed)
    link = Link("l", 1.0)
    made = [Flow({link: 1.0}, math.inf, 0.0) for _ in range(rng.randint(1, 40))]
    for flow, born in zip(made, rng.sample(range(10 ** 12), len(made))):  # (distinct, in any order)
        flow.born = born
    flows = dict.fromkeys(rng.sample(made, len(made)))
    borns = [flow.born for flow in flows]
    state = Solves._state(flows, (), [link])
    assert state[2] == tuple(sorted(range(len(borns)), key=borns.__getitem__))
