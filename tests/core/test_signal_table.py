"""validate()'s signal counts and cycle check on arrays (mkernel/signal_table.py, races.acyclic).

The oracles are brute force, here in the test: every member of every group made with
``Task.member`` and its bumps counted one by one (at the partial build's homes where it has them),
each member's waits looked up in that count; and the Python happens-before graph with its Kahn
order (:func:`mkernel.races.topological_order`). Builds of every op (full, first-nodes, local rank
0 alone, so cycling signals and folded homes too) must agree with them record for record; seeded
mutations of waits and signals must give validate()'s message exactly where the brute-force count
finds the first wait it breaks, and added waits make cycles exactly where the Python graph has one.
"""
from __future__ import annotations

import dataclasses
import functools
import random
from collections import Counter, defaultdict

import numpy as np
import pytest
from harness import golden_schedules as golden

from mkernel import ScheduleError, builders
from mkernel.ir import Schedule, Signal, Wait
from mkernel.races import acyclic, happens_before_graph, topological_order
from mkernel.signal_table import count_homes, signal_table
from mkernel import validation as V


@functools.lru_cache(maxsize=1)
def _schedules() -> tuple[Schedule, ...]:
    """Grouped fused and baseline builds of every op on 2 x 4 and 3 x 2, full and partial."""
    out, seen = [], set()
    for name, w, c, first in golden.cases():
        key = (w.kernel, c.nodes, first)
        if not ("/2x4/" in name or "/3x2/" in name) or key in seen:
            continue
        seen.add(key)
        out += golden.build_pair_grouped(w, c, first)
    w, c = next((w, c) for name, w, c, first in golden.cases() if name.startswith("gemm_ar/2x4/") and first)
    w = dataclasses.replace(w, m=1024, n=2048)  # whole slots: local rank 0 alone, its tiles' owners cycling
    assert builders.local_symmetric(w, c)
    return tuple(out) + (builders.get("gemm_ar").build(w, c, first_nodes=1, grouped=True, local_fold=True),)


CASES = _schedules()
IDS = [f"{s.kernel}/{s.variant}/{s.world}/{s.first_nodes}/{s.local_fold}/{len(s.tasks)}" for s in CASES]


def _home(s: Schedule):
    return count_homes(s.world, s.gpus_per_node, s.first_nodes, s.local_fold)


def _key(g: Signal, home) -> tuple:
    return (home[g.rank] if home else g.rank, g.name, g.index)


def _brute(s: Schedule):
    """Every member's bumps counted one by one; and (entry, wait, member, have, count, whether a
    library launch's task bumps it but the waiter is in none) of each wait of each member whose wait
    steps (of member 0 for one that does not: every member's is the same)."""
    home, bumps, waits, library = _home(s), Counter(), [], set()
    for t in s.tasks:
        for i in range(t.count):
            keys = [_key(g, home) for g in t.member(i).signals]
            bumps.update(keys)
            if s.launches[t.launch].library:
                library.update(keys)
    for t in s.tasks:
        steps = t.step.waits if t.count > 1 and t.step.waits else (0,) * len(t.waits)
        for j, dx in enumerate(steps):
            for i in range(t.count) if dx else (0,):
                w = t.member(i).waits[j]
                k = _key(w.signal, home)
                waits.append((t.id, j, i, bumps[k], w.count, k in library and not s.launches[t.launch].library))
    return bumps, waits


def test_the_cases_have_groups_stepping_waits_cycling_signals_and_folded_homes():
    tasks = [t for s in CASES for t in s.tasks if t.count > 1]
    assert any(t.step.waits for t in tasks) and any(t.step.period for t in tasks)
    assert any(s.local_fold for s in CASES) and any(s.first_nodes and not s.local_fold for s in CASES)


@pytest.mark.parametrize("s", CASES, ids=IDS)
def test_the_table_counts_every_members_bumps(s):
    table, (bumps, waits) = signal_table(s, _home(s)), _brute(s)
    have = np.bincount(table.bump_key, _times(table), table.keys).astype(np.int64)
    assert sorted(have[have > 0]) == sorted(bumps.values())  # the same keys, each bumped as often
    assert table.bumps().tolist() == have.tolist()  # (the fixed bumps' times and the member bumps' ones, apart)
    got = list(zip(table.wait_entry.tolist(), table.wait_j.tolist(), table.wait_member.tolist(),
                   have[table.wait_key].tolist(), table.wait_count.tolist()))
    assert got == [w[:5] for w in waits]


def _wait_mutations(s: Schedule, rng: random.Random):
    """(name, schedule) with one entry's waits or signals changed."""
    waiting = [t for t in s.tasks if t.waits]
    bumping = [t for t in s.tasks if t.signals]
    for t in rng.sample(waiting, min(4, len(waiting))):
        w = t.waits[-1]
        for name, new in (("count + 1", Wait(w.signal, w.count + 1)), ("count + 1000", Wait(w.signal, w.count + 1000)),
                          ("index", Wait(Signal(w.signal.rank, w.signal.name, w.signal.index + 7), w.count)),
                          ("name", Wait(Signal(w.signal.rank, "nothing", w.signal.index), w.count))):
            yield name, dataclasses.replace(t, waits=t.waits[:-1] + (new,))
        if t.count > 1:
            steps = t.step.waits or (0,) * len(t.waits)
            yield "wait steps", dataclasses.replace(t, step=dataclasses.replace(
                t.step, waits=steps[:-1] + (steps[-1] + 1,)))
    for t in rng.sample(bumping, min(4, len(bumping))):
        dropped = dataclasses.replace(t, signals=t.signals[1:])
        if t.count > 1 and t.step.signals:  # (its step too, so the step still fits)
            st = t.step
            dropped = dataclasses.replace(dropped, step=dataclasses.replace(
                st, signals=st.signals[1:], outer=st.outer[1:], period=st.period if len(t.signals) > 1 else 0))
        yield "signal dropped", dropped
        if t.count > 1 and t.step.signals and not t.step.period:
            st = t.step
            yield "signal steps", dataclasses.replace(t, step=dataclasses.replace(
                st, signals=((st.signals[0][0], st.signals[0][1] + 1),) + st.signals[1:]))


def _first_broken(s: Schedule) -> str | None:
    """The brute-force verdict of the signal-count rule: the first wait (by entry, wait, member) whose
    signal is bumped fewer than its count times, or by a library launch's task where it waits outside one."""
    for e, j, i, have, count, library in _brute(s)[1]:
        if have < count or library:
            member = s.tasks[e].member(i)
            sig = member.waits[j].signal
            return (f"{member.describe()}: waits on {sig}, which no task signals" if have == 0 else
                    f"{member.describe()}: waits for {sig} >= {count}, but only {have} tasks bump it"
                    if have < count else f"{member.describe()}: waits on {sig}, which a library launch's task bumps")
    return None


@pytest.mark.parametrize("s", CASES[::3], ids=IDS[::3])
def test_mutated_waits_fail_where_the_brute_force_count_does(s):
    rng, failed = random.Random(len(s.tasks)), 0
    for name, t in _wait_mutations(s, rng):
        m = dataclasses.replace(s, tasks=s.tasks[:t.id] + (t,) + s.tasks[t.id + 1:])
        try:
            V._check_signals(m, signal_table(m, _home(m)))
            got = None
        except ScheduleError as e:
            got = str(e)
        want = _first_broken(m)
        assert got == want or (got is not None and want is not None and got.startswith(want)), name
        failed += got is not None
    assert failed >= 4


def _python_cycle(s: Schedule) -> bool:
    preds = happens_before_graph(s, every_signaler=True)
    return len(topological_order(preds)) < len(preds)


def _closing_loop(s: Schedule) -> Schedule:
    """``s`` with one loop closed for certain: a task that another follows in the Python graph (an
    ungrouped one, or one whose signals do not step) now bumps a new flag on the first one's rank,
    which the first one waits for."""
    succs = defaultdict(list)
    for t, preds in enumerate(happens_before_graph(s, every_signaler=True)):
        for q in preds:
            succs[q].append(t)
    for a in s.tasks:
        seen, todo = set(), list(succs[a.id])
        while todo:
            t = todo.pop()
            if t in seen or t >= len(s.tasks):
                continue
            seen.add(t)
            todo += succs[t]
            b = s.tasks[t]
            if b.id != a.id and (b.count == 1 or not b.step.signals) and (a.count == 1 or not a.step.waits):
                flag = Signal(a.rank, "closing loop", 0)
                tasks = list(s.tasks)
                tasks[b.id] = dataclasses.replace(b, signals=b.signals + (flag,))
                tasks[a.id] = dataclasses.replace(a, waits=a.waits + (Wait(flag, b.count),))
                return dataclasses.replace(s, tasks=tuple(tasks))
    raise AssertionError(f"{s.kernel}: no task follows another")


@pytest.mark.parametrize("s", [s for s in CASES if not s.first_nodes][::2],
                         ids=[i for s, i in zip(CASES, IDS) if not s.first_nodes][::2])
def test_added_waits_make_a_cycle_where_the_python_graph_has_one(s, monkeypatch):
    """A wait on a later (or earlier) task's signal: the arrays find a cycle exactly where the
    Python graph does (then the Python path names it, as before)."""
    rng, named = random.Random(len(s.tasks)), []
    monkeypatch.setattr(V, "_name_cycle", named.append)
    bumping = [t for t in s.tasks if t.signals]
    named.clear()
    loop = _closing_loop(s)
    V._check_cycles(loop, signal_table(loop))
    assert named and _python_cycle(loop)  # a loop for certain: the arrays find it too
    for _ in range(12):
        a, b = rng.choice(s.tasks), rng.choice(bumping)
        g = b.signals[0]
        t = dataclasses.replace(a, waits=a.waits + (Wait(Signal(a.rank, g.name, g.index), 1),))
        if t.count > 1 and t.step.waits:  # (the added wait does not step)
            t = dataclasses.replace(t, step=dataclasses.replace(t.step, waits=t.step.waits + (0,)))
        m = dataclasses.replace(s, tasks=s.tasks[:a.id] + (t,) + s.tasks[a.id + 1:])
        named.clear()
        V._check_cycles(m, signal_table(m))
        assert bool(named) == _python_cycle(m)
    assert not _python_cycle(s)


def test_acyclic_agrees_with_kahn_on_random_graphs():
    rng = random.Random(30)
    verdicts = Counter()
    for trial in range(300):
        nodes = rng.randint(1, 40)
        edges = [(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(rng.randint(0, 2 * nodes))]
        if trial % 2:  # mostly forward edges: acyclic unless a back edge slips in
            edges = [(min(a, b), max(a, b)) if rng.random() < 0.97 else (a, b) for a, b in edges]
        preds = [[] for _ in range(nodes)]
        for a, b in edges:
            preds[b].append(a)
        src, dst = (np.array(x, np.int64) for x in zip(*edges)) if edges else (np.zeros(0, np.int64),) * 2
        want = len(topological_order(preds)) == nodes
        assert acyclic(src, dst, nodes) == want, edges
        verdicts[want] += 1
    assert min(verdicts.values()) > 50


@pytest.mark.parametrize("field", ["signals", "waits"])
def test_a_step_that_does_not_fit_is_refused_and_validate_names_it(field):
    s = next(s for s in CASES if any(t.count > 1 and getattr(t.step, field) for t in s.tasks))
    t = next(t for t in s.tasks if t.count > 1 and getattr(t.step, field))
    steps = getattr(t.step, field)
    bad = dataclasses.replace(t, step=dataclasses.replace(t.step, **{field: steps + steps[-1:]}))
    m = dataclasses.replace(s, tasks=s.tasks[:t.id] + (bad,) + s.tasks[t.id + 1:])
    with pytest.raises(ValueError, match="do not fit"):
        signal_table(m)
    n = len(getattr(t, field))
    with pytest.raises(ScheduleError, match=f"its step has {n + 1} {field} steps for {n} {field}"):
        m.validate(races=False)


def test_keys_are_numbered_alike_whether_or_not_their_numbers_fit_one_integer():
    """Signal indices far apart (past what one 63-bit number per key can span) take the sort of
    three keys; spread wider than the rows (one number each, sorted) or close (marked, counted)
    one key: all three number the distinct (name, rank, index) rows alike, in the same order; and
    so they do the rows split into blocks (the bumps and the waits), each block numbered as its
    part of the whole, an empty block too."""
    from mkernel.signal_table import _dense

    rng = np.random.default_rng(30)
    name, rank, index = (rng.integers(0, k, 5000) for k in (3, 16, 40))
    distinct = len(set(zip(name.tolist(), rank.tolist(), index.tolist())))
    got = {}
    # the keys' numbers are 32-bit where they are marked in a 32-bit table (few possible keys), else numpy's own
    for spread, dtype in ((1, np.int32), (1000, np.int64), (2 ** 56, np.int64)):
        rows = np.stack((name, rank, index * spread))
        keys, got[spread] = _dense(rows.copy())
        assert keys == distinct and got[spread].dtype == dtype
        for cut in (0, 1234, 5000):
            keys, *parts = _dense(rows[:, :cut].copy(), rows[:, cut:].copy())
            assert keys == distinct and all(p.dtype == dtype for p in parts)
            assert (parts[0] == got[spread][:cut]).all() and (parts[1] == got[spread][cut:]).all()
    small = got[1]
    assert (small == got[1000]).all() and (small == got[2 ** 56]).all()
    assert small.max() + 1 == distinct
    assert (np.diff(small[np.lexsort((index, rank, name))]) >= 0).all()
    assert _dense(np.zeros((3, 0), np.int64), np.zeros((3, 0), np.int64))[0] == 0


@pytest.mark.parametrize("first, step", [(2 ** 31 - 2, 1), (-2 ** 31 + 1, -1), (2 ** 31, 0)])
def test_a_signal_index_past_32_bits_is_refused_for_any_member(first, step):
    """A signal index of any member (a group's last, stepped past 2^31 - 1 or below -2^31, or member 0's) is
    refused by validate(), naming the range: the simulator keys a signal's index in 32 bits, where one past them
    would share another signal's counter. The same group stepping within the range is valid. Planted error tried:
    the highest index not checked (the group stepping past 2^31 - 1 then validates)."""
    from mkernel import BufferKind, Op, Region, Role, ScheduleBuilder
    from mkernel.ir import Step

    def build(start: int):
        sb = ScheduleBuilder("t", "fused", world=1, gpus_per_node=1, num_sms=4, grouped=True)
        sb.buffer("X", 64, 64, kind=BufferKind.INPUT)
        sb.buffer("Y", 64, 64)
        sb.launch("k", {Role.COMPUTE: 2, Role.INTRA: 1})
        sb.add(0, Role.COMPUTE, Op.COPY, reads=(Region("X", 0, 0, 16, 0, 64),), writes=(Region("Y", 0, 0, 16, 0, 64),),
               signals=(Signal(0, "s", start),), count=4, label="c {}",
               step=Step(((0, 16, 0), (0, 16, 0)), ((0, step),), label=(0, 1)))
        return sb.build(0.0)

    with pytest.raises(ScheduleError, match="signal indexes from .* are allowed"):
        build(first).validate()
    build(first - 8 * step if step else 5).validate()


def _times(table) -> np.ndarray:
    """How many times each bump record of ``table`` is bumped: its fixed records' times, then one each (the
    plain form that SignalTable.bumps() sums by key)."""
    times = np.ones(len(table.bump_key), np.int64)
    times[:len(table.fixed_times)] = table.fixed_times
    return times
