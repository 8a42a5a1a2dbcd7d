"""The NVLink path's per-entry plans (sim/nvplan.py's Shapes.plan) and the links' weights per member
(sim/flows.py's Link.units) against their plain forms: every entry's plan as the fields give it, and every
link's groups and weights as a weight per group would hold them."""
from __future__ import annotations

import dataclasses
import math
import random

import pytest

from mkernel import Cluster, Workload
from mkernel.builders import get
from mkernel.ir import Op
from mkernel.sim import nvplan
from mkernel.sim.engine import Model
from mkernel.sim.environment import CountingEnvironment
from mkernel.sim.flows import FlowNet, Link
from mkernel.sim.runs import joins
from test_nvflow_paths import _copies  # (rank 0 copies to ranks 1-3, or columns step; rank 1 reduces)

NVLINK = (Op.COPY, Op.REDUCE, Op.GATHER)


def _builds():
    c = Cluster("t", 2, 4, transport="ib_rc")
    for kernel, w in (("gemm_ar", Workload(m=576, n=1024, k=64, chunk_tiles=2)),
                      ("gemm_rs", Workload(kernel="gemm_rs", m=512, n=512, k=64)),
                      ("ag_gemm", Workload(kernel="ag_gemm", m=512, n=512, k=64))):
        yield get(kernel).build(w, c, grouped=True), c
    for step_rank in (1, 0):
        yield _copies(step_rank).build(0.0), Cluster("t", 1, 4)


def _legs(m: Model, plan) -> list[tuple]:
    """A flow plan's legs, each link named by its port list and rank in model ``m``."""
    port = {id(link): (name, r) for name, links in (("out", m.nv_out), ("in", m.nv_in)) for r, link in enumerate(links)}
    return [(port[id(link)], payload, busy) for link, payload, busy in plan.legs]


@pytest.mark.parametrize("i", range(5))
def test_each_entrys_kept_plan_is_the_plan_its_fields_give(i):
    """Shapes.plan gives each NVLink entry whose members share a run the plan nvplan.plan makes of it (equal
    plans one object, exactly where the fields' keys are equal), and none to an entry whose members reach
    other ranks (each run is then one member, with its own plan) or to a task not at its id's position.
    (Planted and caught: the rank steps read off another column; every entry given the first one's plan.)"""
    s, c = list(_builds())[i]
    m = Model(s, c, None, regions=s.validate(races=False))
    plain = Model(s, c, None)  # (no table: plans by the fields, nvplan.shared's)
    nv = [t for t in s.tasks if t.op in NVLINK]
    assert nv and m.nv_shapes is not None and plain.nv_shapes is None
    by_plan: dict[int, set] = {}
    for t in nv:
        made = m.nv_shapes.plan(m, t)
        if t.count > 1 and not joins(t.op, t.count, t.step, 0.0):
            assert made is None
            continue
        assert made is not None and made is m.nv_shapes.plan(m, t)
        want = nvplan.plan(plain, t)
        assert made[:3] == want[:3] and made[4:] == want[4:] and (made[3] is None) == (want[3] is None)
        if want[3] is not None:
            assert made[3].size == want[3].size and made[3].whole == want[3].whole
            assert _legs(m, made[3]) == _legs(plain, want[3])
        key = (t.op, t.rank, t.accumulate, len(t.index), len(t.reads),
               *[(r.buffer, r.rank, r.row1 - r.row0, r.col1 - r.col0) for r in t.reads + t.writes])
        by_plan.setdefault(id(made), set()).add(key)
    keys = [k for ks in by_plan.values() for k in ks]
    assert all(len(ks) == 1 for ks in by_plan.values()) and len(keys) == len(set(keys))  # (a plan per fields' key)
    if i == 3:  # (the copy to ranks 1, 2, 3: members of their own; the reduction: the entry's)
        assert [m.nv_shapes.plan(m, t) is None for t in nv] == [True, False]
    assert m.nv_shapes.plan(m, dataclasses.replace(nv[0])) is None  # (equal, but not the schedule's entry)


def _live(links: list[Link], groups: list) -> list[list[tuple]]:
    """Each link's groups and their weights, as a weight per group kept them: the live groups on it in the
    order they came on (their births), each at its weight per member times its members."""
    out = []
    for link in links:
        on = sorted([g for g in groups if g.count and link in g.unit], key=lambda g: g.born)
        out.append([(g, g.unit[link] * g.count) for g in on])
    return out


@pytest.mark.parametrize("seed", range(30))
def test_a_links_groups_and_weights_are_what_a_weight_per_group_held(seed):
    """Transfers of a few shapes (counts 1-3, some at one instant) start and end on a small network; after
    every start and every re-rate, each link's groups (Link.flows) are the live groups on it in the order
    they came, at their weights per member times their members, and its weight their sum within rounding.
    (Planted and caught: a group entering only when it starts with one member; a group left on its links
    when it retires.)"""
    rng = random.Random(seed)
    env, links = CountingEnvironment(), [Link(f"l{i}", rng.choice([1.0, 3.0, 7.5])) for i in range(4)]
    net = FlowNet(env)
    plans = []
    for _ in range(3):
        on = rng.sample(links, rng.randint(1, 3))
        size = float(rng.choice([4, 9, 30]))
        plans.append(net.plan_legs(size, [(link, size, size * rng.choice([1.0, 0.5, 2.0])) for link in on],
                                   rng.choice([math.inf, 2.0])))
    made: dict[int, object] = {}
    checked = [0]

    def check() -> None:
        for group in [p.shape.group for p in plans] + [p.shape.spare for p in plans]:
            if group is not None:
                made[id(group)] = group
        want = _live(links, list(made.values()))
        assert [list(link.flows.items()) for link in links] == want
        for link, pairs in zip(links, want):
            assert len(link.flows) == len(pairs) and list(link.flows) == [g for g, _ in pairs]
            assert link.weight == pytest.approx(sum(w for _, w in pairs), rel=1e-9, abs=1e-9)
        checked[0] += 1

    def start(plan, count):
        net.transfer_plan(plan, count, then=lambda _e: None)
        check()

    for _ in range(12):
        at = float(rng.choice([0, 0, 1, 2.5, 4, 7]))
        env.call_at(at, lambda _a, p=rng.choice(plans), n=rng.randint(1, 3): start(p, n))
    while env.peek() < math.inf:
        env.step()
        check()
    assert checked[0] > 12 and not any(link.flows for link in links)
