"""The NVLink run path's shortcuts (sim/engine.py's _nvlink, sim/nvplan.py, sim/flows.py) against
their general paths: a group started again at one instant is marked once, a plan's flows are
counted (their bytes owed to their links) only while that is exact, and an entry's plan is kept
by the entry only where its members share one (else each member gets its own)."""
from __future__ import annotations

import dataclasses
import math
import random

import numpy as np
import pytest

from mkernel import Cluster
from mkernel.ir import Op, Region, Role, Step, expand
from mkernel.schedule_builder import ScheduleBuilder
from mkernel.sim.engine import Model
from mkernel.sim.flows import WHOLE, Flow, FlowNet, Link
from mkernel.sim import maxmin
from mkernel.sim.maxmin import Solves
from mkernel.sim.environment import CountingEnvironment


def test_a_group_started_at_an_instant_where_it_changed_already_is_rerated_with_it():
    """Two 60-byte flows of one shape start at t=0 on a 30 B/us link (one group: the second finds
    it touched and marks nothing), a third at t=1 (the group untouched then: it must be re-rated).
    At 15 B/us each until t=1, then 10 each: the first two end at 5.5, the third's last 15 bytes
    alone at 30 B/us end at 6. (Skipping the mark of any group that exists leaves the three at 15
    each from t=1, the link over its capacity, and ends at 4 and 5.)"""
    env = CountingEnvironment()
    net, link = FlowNet(env), Link("L", 30.0)
    plan = net.plan_legs(60.0, [(link, 60.0, 60.0)])
    ends: list[float] = []

    def start(_a) -> None:
        net.transfer_plan(plan, 1, then=lambda _e: ends.append(env.now))
    for at in (0.0, 0.0, 1.0):
        env.call_at(at, start)
    env.run()
    assert ends == pytest.approx([5.5, 5.5, 6.0], rel=1e-12, abs=0)


def _added(net: FlowNet, link: Link, legs: list[tuple[float, float]], count: int = 1) -> None:
    net.transfer_plan(net.plan_legs(sum(b for _, b in legs), [(link, p, b) for p, b in legs]), count)


def test_flows_are_counted_only_where_their_owed_bytes_give_the_legs_bits():
    """Whole amounts: the flows counted, the links' totals the bits of the legs'. A fraction: what
    is owed added to the links, then leg by leg, on that plan and on every later one (1.0 + 0.7 +
    0.1 is 1.8; 1.0 + (0.7 + 0.1) is 1.7999999999999998; after a fraction on the link, 2/3 + 797927
    + 471326 and 2/3 + (797927 + 471326) differ too)."""
    net = FlowNet(CountingEnvironment())
    a, b = Link("A", 1.0), Link("B", 1.0)
    net.transfer_plan(net.plan_legs(9.0, [(a, 3.0, 4.0), (b, 3.0, 4.0), (a, 2.0, 5.0)]), 3)
    assert (a.bytes, a.busy_bytes, b.bytes, b.busy_bytes) == (15.0, 27.0, 9.0, 12.0)
    assert net.whole_left == WHOLE - 3 * 21.0
    _added(net, a, [(1.0, 1.0)])
    frac = Link("F", 1.0)
    _added(net, frac, [(1.0, 1.0)])
    _added(net, frac, [(0.7, 0.7), (0.1, 0.1)])
    assert frac.bytes == frac.busy_bytes == (1.0 + 0.7) + 0.1 == 1.8
    assert net.whole_left == -float("inf") and (a.bytes, a.busy_bytes, b.bytes) == (16.0, 28.0, 9.0)
    assert not a.owed and not b.owed
    third = Link("T", 1.0)
    _added(net, third, [(2 / 3, 2 / 3)])
    _added(net, third, [(797927.0, 797927.0), (471326.0, 471326.0)])
    assert third.bytes == (2 / 3 + 797927.0) + 471326.0 != 2 / 3 + (797927.0 + 471326.0)


def test_flows_are_counted_no_more_before_the_totals_could_round():
    """Whole amounts that would take the links' totals to WHOLE go leg by leg, and so does all after."""
    net = FlowNet(CountingEnvironment())
    link = Link("A", 1.0)
    net.whole_left = 10.0
    _added(net, link, [(2.0, 2.0), (2.0, 2.0)])  # 8 < 10: counted
    assert net.whole_left == 2.0
    _added(net, link, [(1.0, 1.0), (1.0, 1.0)])  # 4 > 2: leg by leg, and no sums from here on
    assert net.whole_left == -float("inf") and link.bytes == link.busy_bytes == 6.0


def _copies(step_rank: int) -> ScheduleBuilder:
    """Rank 0 copies a tile to ranks 1, 2, 3 (members stepping the write's rank: each member its own
    flow) or three tiles to rank 1 (members stepping columns: one run, one flow)."""
    sb = ScheduleBuilder("t", "fused", 4, 4, 8, grouped=True)
    sb.buffer("X", 4, 64)
    sb.launch("l", {Role.INTRA: 2})
    sb.add(0, Role.INTRA, Op.COPY, reads=(Region("X", 0, 0, 1, 0, 8),), writes=(Region("X", 1, 0, 1, 0, 8),),
           label="c {}", count=3, step=Step(((0, 0, 8), (step_rank, 0, 8 - 8 * step_rank)), label=(0, 1)))
    sb.add(1, Role.INTRA, Op.REDUCE, reads=(Region("X", 2, 1, 2, 0, 8), Region("X", 3, 1, 2, 0, 8)),
           writes=(Region("X", 1, 1, 2, 0, 8),), label="r {}", count=2,
           step=Step(((0, 0, 8), (0, 0, 8), (0, 0, 8)), label=(0, 1)))
    return sb


@pytest.mark.parametrize("step_rank", [1, 0])
def test_a_groups_runs_put_each_members_bytes_on_its_own_ports(step_rank):
    """The grouped run and its expansion (every member its own task) load every NVLink port with the
    same bytes and end at the same times: where members reach other ranks, each gets its own plan
    (keeping member 0's by the entry would put all three copies on rank 1's ingress)."""
    s, c = _copies(step_rank).build(0.0), Cluster("t", 1, 4)
    grouped, flat = Model(s, c, None), Model(expand(s), c, None)
    grouped.run()
    flat.run()
    ports = [[(link.bytes, link.busy_bytes) for link in m.nv_out + m.nv_in] for m in (grouped, flat)]
    assert ports[0] == ports[1]
    assert all(ports[0][4 + r][0] > 0 for r in (1, 2, 3) if step_rank or r == 1)
    assert grouped.finish == pytest.approx(flat.finish, rel=1e-12, abs=0)


def _field_key(t) -> tuple:
    """What a plan is a function of, read off the task's fields (nvplan.shared without Shapes)."""
    return (t.op, t.rank, t.accumulate, len(t.index), len(t.reads),
            *[(r.buffer, r.rank, r.row1 - r.row0, r.col1 - r.col0) for r in t.reads + t.writes])


def _nv_builds():
    from mkernel import Workload
    from mkernel.builders import get
    c = Cluster("t", 2, 4, transport="ib_rc")
    for kernel, w in (("gemm_ar", Workload(m=576, n=1024, k=64, chunk_tiles=2)),  # (edge tiles of 64 rows)
                      ("gemm_rs", Workload(kernel="gemm_rs", m=512, n=512, k=64)),
                      ("ag_gemm", Workload(kernel="ag_gemm", m=512, n=512, k=64)),
                      ("ring_attention", Workload(kernel="ring_attention", m=256, n=64, k=32, tile_m=64))):
        yield get(kernel).build(w, c, grouped=True)


@pytest.mark.parametrize("s", list(_nv_builds()), ids=lambda s: s.kernel)
def test_plan_keys_read_off_the_region_table_part_the_entries_as_their_fields_do(s):
    """Two NVLink entries share a :class:`Shapes` key exactly where their fields' keys are equal (planted
    and caught: the rows or the rank left out of a region's number; the codes of another entry)."""
    from mkernel.sim.nvplan import Shapes
    shapes = Shapes(s, s.validate(races=False))
    nv = [t for t in s.tasks if t.op in (Op.COPY, Op.REDUCE, Op.GATHER)]
    assert len(nv) > 8
    by_fields, by_table = {}, {}
    for t in nv:
        by_fields.setdefault(_field_key(t), []).append(t.id)
        by_table.setdefault(shapes.key(t), []).append(t.id)
    assert sorted(by_fields.values()) == sorted(by_table.values()) and None not in by_table
    # the regions' number alone parts every entry (of any op, any count of regions) as its regions do
    # (planted and caught: entries of different counts of regions numbered from 0 each)
    by_regions = {}
    for t in s.tasks:
        by_regions.setdefault(tuple((r.buffer, r.rank, r.row1 - r.row0, r.col1 - r.col0)
                                    for r in t.reads + t.writes), set()).add(shapes.ids[t.id])
    assert all(len(ids) == 1 for ids in by_regions.values()) and len(set().union(*by_regions.values())) == len(by_regions)


def test_plan_keys_of_numbers_past_64_bits_together_and_of_tasks_not_in_the_table(monkeypatch):
    """Where a region's four numbers do not fit one 64-bit number together, they are numbered by sorting
    (the same parting); a task not at its id's position (an equal copy of an entry, or a member made from a group) has no key there."""
    from mkernel.sim.nvplan import Shapes
    s = next(_nv_builds())
    recs, fields, codes = s.validate(races=False)
    wide = recs.astype(np.int64)
    wide[:, 5] += 2 ** 60  # every region 2^60 columns wider: the same parting
    a, b = Shapes(s, (recs, fields, codes)), Shapes(s, (wide, fields, codes))
    nv = [t for t in s.tasks if t.op in (Op.COPY, Op.REDUCE, Op.GATHER)]
    assert a.ids is None  # (made at the first key)
    sorted_rows = []  # the rows numbered by sorting (np.unique along axis 0): b's alone
    unique = np.unique
    monkeypatch.setattr(np, "unique", lambda *args, **kw: sorted_rows.append(kw.get("axis")) or unique(*args, **kw))
    same = [[a.key(x) == a.key(y) for y in nv] for x in nv]
    assert 0 not in sorted_rows
    assert same == [[b.key(x) == b.key(y) for y in nv] for x in nv] and any(not all(row) for row in same)
    assert 0 in sorted_rows
    copy = dataclasses.replace(nv[0])  # (equal, but not the schedule's entry)
    assert copy == nv[0] and a.key(copy) is None and a.key(nv[0]) is not None


def _rates_of(transfers, links, solves: Solves) -> tuple[list, list, int]:
    """Every live group's rate after every re-rate and every transfer's end, on a net solving its whole
    components through ``solves``; and how many re-rates there were."""
    env, seen, ends = CountingEnvironment(), [], []

    class Net(FlowNet):
        def _flush(self, event) -> None:
            super()._flush(event)
            seen.append([(tuple((link.name, w) for link, w in g.key[0]), g.key[1], g.count, g.rate)
                         for g in self.groups.values()])

    net = Net(env)
    net.solves = solves

    def start(at, size, legs, cap, count):
        yield env.timeout(at)
        yield net.transfer_legs(size, [(links[name], size, size * w) for name, w in legs], cap, count)
        ends.append((env.now, size))

    for t in transfers:
        env.process(start(*t))
    env.run()
    return seen, ends, len(seen)


def _waves(seed: int) -> tuple[list, dict[str, Link]]:
    """Lockstep waves, as the lanes of an every-node run make them: each wave one of three patterns of
    copies between four GPUs (weights 1 and 1/3, two SM caps, seeded counts), of one size, the wave's
    copies started in two steps; the next wave starts when the last could have ended."""
    rng = np.random.default_rng(seed)
    links = {f"{d}{g}": Link(f"{d}{g}", 90.0) for g in range(4) for d in ("out", "in")}
    shapes = [([(f"out{s}", 1.0), (f"in{(s + k) % 4}", 1.0 if k == 1 else 1 / 3)], 25.0 if k == 1 else 40.0)
              for s in range(4) for k in (1, 2)]
    patterns = [[(legs, cap, int(rng.choice([1, 2, 3]))) for legs, cap in shapes if rng.random() < 0.7]
                for _ in range(3)]
    transfers = []
    for wave in range(16):
        for j, (legs, cap, count) in enumerate(patterns[int(rng.integers(3))]):
            transfers.append((wave * 8.0 + 0.5 * (j % 2), 30.0, legs, cap, count))
    return transfers, links


@pytest.mark.python_core
@pytest.mark.parametrize("seed", range(6))
def test_a_component_seen_again_is_rated_as_the_filling_rates_it(seed):
    """Whole components rated from a remembered state (Solves) against the filling every time
    (``kept=0``): every group's rate after every re-rate, and every transfer's end, bit for bit, on
    lockstep waves whose states repeat (most re-rates find theirs)."""
    plain = _rates_of(*_waves(seed), Solves(kept=0))
    kept = Solves()
    assert _rates_of(*_waves(seed), kept) == plain
    assert len(kept._rates) < plain[2] / 4


class _Blind(Solves):
    """A state that leaves one of its parts out (planted errors)."""

    def __init__(self, drop: int) -> None:
        super().__init__()
        self.drop = drop

    def _state(self, flows, keys, order):
        state = list(super()._state(flows, keys, order))
        state[self.drop] = None
        return tuple(state)


def _twice(seed: int, change: str, solves: Solves) -> bool:
    """Two states of one component on three links, solved one after the other by ``solves``: the second
    with one thing changed (a group's plan; two groups' counts, swapped where the two differ only in
    their caps; the order the groups were made; or the links' weights' bits, through a group added
    and taken away first). Whether both got the filling's rates."""
    rng = random.Random(seed)
    links = [Link(f"l{i}", rng.choice([1.0, 3.0, rng.uniform(0.5, 5.0)])) for i in range(3)]
    plans = []
    for _ in range(4):
        unit = {links[i]: rng.choice([1.0, 1 / 3, rng.uniform(0.1, 2.0)]) for i in rng.sample(range(3), rng.randint(1, 3))}
        cap = rng.choice([math.inf, rng.uniform(0.1, 3.0)])
        plans.append((unit, cap, (tuple(unit.items()), cap)))  # (a plan key, as FlowNet.plan_legs interns it)
    counts, made = [rng.randint(1, 3) for _ in range(3)], [0, 1, 2]
    if change == "count":  # (groups 0 and 1 alike but for their caps, their counts swapped: the links' weights stay)
        cap = rng.uniform(0.1, 3.0)
        plans[1] = (plans[0][0], cap, (plans[0][2][0], cap))
        counts[1] = 1 + counts[0] % 3
    ok = True
    for second in (False, True):
        use = list(plans[:3])
        if second and change == "plan":
            use[2] = plans[3]
        if second and change == "count":
            counts[0], counts[1] = counts[1], counts[0]
        if second and change == "born":
            made = [1, 0, 2]
        if second and change == "weight":
            extra = Flow({links[0]: 0.1, links[1]: 0.7, links[2]: 0.3}, math.inf, 0.0)
            extra.add(1)
        groups = {}
        for j in made:
            unit, cap, key = use[j]
            groups[j] = Flow(unit, cap, 0.0, key)
            groups[j].add(counts[j])
        if second and change == "weight":
            extra.add(-1)
            for link in links:
                del link.flows[extra]
        for _ in range(2):  # (each state twice: a state is made only for groups met together before)
            flows, rates = solves.resolve(dict.fromkeys(links))
            ok &= dict(zip(flows, rates)) == maxmin.max_min(maxmin.component(dict.fromkeys(links)))
        for g in groups.values():
            for link in g.links:
                del link.flows[g]
        for link in links:
            link.weight = 0.0
    return ok


@pytest.mark.python_core
@pytest.mark.parametrize("drop, change", [(0, "plan"), (1, "count"), (2, "born"), (3, "weight")])
def test_a_state_short_of_any_part_is_caught(drop, change, monkeypatch):
    """Solves gets every state's rates right, and a state without any one of its parts (planted:
    plan keys, counts, the order the groups were made, link weights) gets some wrong. (Components of
    three groups: remembered here, below the size a network remembers by default.)"""
    monkeypatch.setattr(maxmin, "SOLVES_FROM", 1)
    assert all(_twice(seed, change, Solves()) for seed in range(400))
    assert not all(_twice(seed, change, _Blind(drop)) for seed in range(400))


def _scattered(seed: int) -> tuple[list, dict[str, Link]]:
    """Copies of seeded sizes and counts between four GPUs at seeded times, on eight paths (so groups
    meet again, in states that rarely repeat: their counts and the links' weights differ)."""
    rng = np.random.default_rng(seed)
    links = {f"{d}{g}": Link(f"{d}{g}", 90.0) for g in range(4) for d in ("out", "in")}
    transfers = []
    for _ in range(80):
        s, k = int(rng.integers(4)), int(rng.integers(1, 3))
        transfers.append((float(rng.uniform(0, 40)), float(rng.uniform(5, 60)),
                          [(f"out{s}", 1.0), (f"in{(s + k) % 4}", 1.0 if k == 1 else 1 / 3)], 25.0,
                          int(rng.integers(1, 5))))
    return transfers, links


@pytest.mark.python_core
def test_a_network_whose_states_rarely_repeat_stops_remembering(monkeypatch):
    """After the trial's solves, a network that found under a tenth of them remembered stops remembering
    (its rates those of the filling, as before and after); lockstep waves keep remembering; components
    below SOLVES_FROM groups are never remembered."""
    monkeypatch.setattr(maxmin, "SOLVES_TRIAL", 10 ** 9)  # (every state kept: those it remembers, all listed)
    small = Solves()
    flushes = _rates_of(*_scattered(1), small)[2]
    assert 0 < small.solved < flushes and all(len(state[0]) >= maxmin.SOLVES_FROM for state in small._rates)
    monkeypatch.setattr(maxmin, "SOLVES_TRIAL", 20)
    monkeypatch.setattr(maxmin, "SOLVES_FROM", 1)
    scattered, waves = Solves(), Solves()
    assert _rates_of(*_scattered(1), scattered) == _rates_of(*_scattered(1), Solves(kept=0))
    assert scattered.solved == 20 and scattered.kept == 0 and not scattered._rates
    assert _rates_of(*_waves(1), waves) == _rates_of(*_waves(1), Solves(kept=0))
    assert waves.kept > 0 and waves.found * 10 >= waves.solved
