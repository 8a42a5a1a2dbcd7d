"""validate()'s bulk screen of the per-task rules (mkernel/screen.py): an entry it clears keeps every
per-task rule, so validate's verdicts and messages are those of the rules run on every entry.

The oracle is the per-task rules themselves, run here on each entry alone, and validate() with the
screen switched off. Each op's builds are mostly cleared (else the screen saves nothing); seeded
mutations of one entry (bounds, ranks, nodes, inputs written, waits, launches, roles, signals, steps,
labels, ids, shapes) are never cleared where the rules refuse them, and validate() gives the same
message with the screen as without it.
"""
from __future__ import annotations

import dataclasses
import functools
import random

import numpy as np

import pytest
from harness import golden_schedules as golden

from mkernel import BufferKind, Op, ScheduleError, builders
from mkernel.ir import Region, Role, Schedule, Signal, Wait
from mkernel.members import read_regions
from mkernel.screen import cleared
from mkernel.signal_table import signal_table
from mkernel import validation as V


@functools.lru_cache(maxsize=1)
def _schedules() -> tuple[Schedule, ...]:
    """Grouped and flat fused and baseline builds of every op on 2 x 4, and one 3 x 2 (a put's node)."""
    out, seen = [], set()
    for name, w, c, first in golden.cases():
        key = (w.kernel, c.nodes)
        if first or not ("/2x4/" in name or "/3x2/" in name) or key in seen:
            continue
        seen.add(key)
        out += golden.build_pair_grouped(w, c, 0)
    w, c = next((w, c) for name, w, c, first in golden.cases() if name.startswith("gemm_ar/2x4/") and not first)
    rows = builders.get("gemm_ar").build(dataclasses.replace(w, m=1024, n=4096), c, grouped=True)
    assert any(t.count > 1 and t.step.period and t.step.rotate for t in rows.tasks)  # (tile rows: wrapped cycles)
    w, c = next((w, c) for name, w, c, first in golden.cases() if name.startswith("ring_attention/2x4/") and not first)
    causal = golden.build_pair_grouped(dataclasses.replace(w, causal=True), c, 0)  # (masked attention tiles)
    assert any(t.mask for s in causal for t in s.tasks)
    return tuple(out) + (rows, *causal)


CASES = _schedules()


def _rules(s: Schedule, p: int) -> str | None:
    """The per-task rules' verdict on entry ``p`` alone (None: kept)."""
    t = s.tasks[p]
    try:
        if t.id != p:
            raise ScheduleError("id")
        rules = V._TaskRules(s, {b.name: b for b in s.buffers})
        rules.check(t) if t.count == 1 else V._check_group(rules, t)
    except ScheduleError as e:
        return str(e)
    return None


def _verdict(s: Schedule, screen: bool, monkeypatch) -> str | None:
    with monkeypatch.context() as m:
        if not screen:
            m.setattr(V, "cleared", lambda s, table, keys, entries: np.zeros(len(s.tasks), bool))
        try:
            V.validate(s, races=False)
        except ScheduleError as e:
            return str(e)
    return None


@pytest.mark.parametrize("s", CASES, ids=[f"{s.kernel}/{s.variant}/{s.world}/{len(s.tasks)}" for s in CASES])
def test_builds_plain_entries_are_cleared_and_each_entry_cleared_keeps_the_rules(s):
    """Every entry of the kinds the screen decides (a GEMM, attention, norm, copy, reduce, put or nop,
    with no gather index and no mask but an attention's causal one, whose signals cycle, if they do,
    a whole number of times) is cleared in a valid build; gathers are left to the rules."""
    ok = cleared(s, read_regions(s), signal_table(s))
    ops = (Op.GEMM, Op.ATTN, Op.NORM, Op.COPY, Op.REDUCE, Op.PUT, Op.NOP)
    plain = [t.op in ops and not t.index and (not t.mask or t.op is Op.ATTN)
             and not (t.count > 1 and t.step.period and t.count % t.step.period) for t in s.tasks]
    assert list(ok) == plain
    assert all(_rules(s, p) is None for p in range(len(s.tasks)) if ok[p])


def _region(r: Region, **kw) -> Region:
    return dataclasses.replace(r, **kw)


def _mutations(s: Schedule, t):
    """(name, mutated entry) of one entry ``t`` of ``s``, each breaking (or probing) one rule."""
    buf = {b.name: b for b in s.buffers}
    inputs = [b.name for b in s.buffers if b.kind is BufferKind.INPUT]
    regions = t.reads + t.writes
    n = len(t.reads)

    def with_regions(new):
        return dataclasses.replace(t, reads=tuple(new[:n]), writes=tuple(new[n:]))

    if regions:
        k = len(regions) - 1
        r = regions[k]
        rows, cols = buf[r.buffer].rows, buf[r.buffer].cols
        for name, changed in (("row past the buffer", _region(r, row1=rows + 1)),
                              ("moved past the last row", _region(r, row0=r.row0 + rows, row1=r.row1 + rows)),
                              ("moved past the last column", _region(r, col0=r.col0 + cols, col1=r.col1 + cols)),
                              ("empty rows", _region(r, row0=r.row1)), ("negative column", _region(r, col0=-1)),
                              ("rank out of range", _region(r, rank=s.world)),
                              ("another node", _region(r, rank=(r.rank + s.gpus_per_node) % s.world)),
                              ("another rank", _region(r, rank=(r.rank + 1) % s.world)),
                              ("narrower", _region(r, col1=r.col1 - 1) if r.col1 - r.col0 > 1 else r),
                              ("shorter", _region(r, row1=r.row1 - 1) if r.row1 - r.row0 > 1 else r),
                              ("unknown buffer", _region(r, buffer="nowhere"))):
            yield name, with_regions(regions[:k] + (changed,) + regions[k + 1:])
        yield "one region fewer", with_regions(regions[:-1])
        yield "one region more", with_regions(regions + regions[-1:])
        for j in range(1, min(3, len(regions))):  # (an operand's shape: a gemm's B and C, an attention's k and v)
            r = regions[j]
            yield f"operand {j} narrower", with_regions(regions[:j] + (_region(r, col1=r.col1 - 1),) + regions[j + 1:])
            yield f"operand {j} shorter", with_regions(regions[:j] + (_region(r, row1=r.row1 - 1),) + regions[j + 1:])
        if t.writes and t.writes[0].col1 - t.writes[0].col0 > 1:  # (a gemm's C, an attention's acc, a norm's out)
            w = t.writes[0]
            yield "first write narrower", with_regions(t.reads + (_region(w, col1=w.col1 - 1),) + t.writes[1:])
        if t.writes and t.writes[0].row1 - t.writes[0].row0 > 1:
            w = t.writes[0]
            yield "first write shorter", with_regions(t.reads + (_region(w, row1=w.row1 - 1),) + t.writes[1:])
        if t.writes:  # the line between reads and writes moved (as many regions, other operands)
            yield "a write read", dataclasses.replace(t, reads=t.reads + t.writes[:1], writes=t.writes[1:])
        if t.reads:
            yield "a read written", dataclasses.replace(t, reads=t.reads[:-1], writes=t.reads[-1:] + t.writes)
        if t.writes and inputs:
            w = t.writes[0]
            yield "writes an input", with_regions(t.reads + (_region(w, buffer=inputs[0]),) + t.writes[1:])
    yield "task on another rank", dataclasses.replace(t, rank=(t.rank + 1) % s.world)
    yield "launch missing", dataclasses.replace(t, launch=len(s.launches))
    unused = [role for role in Role if role not in dict(s.launches[t.launch].sms)]
    if unused:
        yield "role without SMs", dataclasses.replace(t, role=unused[0])
    if t.waits:
        w = t.waits[0]
        yield "wait elsewhere", dataclasses.replace(t, waits=(Wait(Signal((w.signal.rank + 1) % s.world, w.signal.name,
                                                                          w.signal.index), w.count),) + t.waits[1:])
        yield "wait count 0", dataclasses.replace(t, waits=(Wait(w.signal, 0),) + t.waits[1:])
    if t.signals:
        g = t.signals[0]
        moved = Signal((g.rank + s.gpus_per_node) % s.world, g.name, g.index)
        yield "signal on another node", dataclasses.replace(t, signals=(moved,) + t.signals[1:])
    yield "id", dataclasses.replace(t, id=t.id + 1)
    yield "mask", dataclasses.replace(t, mask=(1, 0))  # (an attention's may be (q0, k0) with k0 <= q0)
    yield "mask backwards", dataclasses.replace(t, mask=(0, 1))
    yield "mask of three", dataclasses.replace(t, mask=(2, 1, 0))
    yield "gather index", dataclasses.replace(t, index=(0,))
    yield "count 0", dataclasses.replace(t, count=0)
    if t.count > 1:
        st = t.step
        yield "one more member", dataclasses.replace(t, count=t.count * 4)
        short = st.regions[:-1] or ((0, 0, 0),) * 9
        yield "step too short", dataclasses.replace(t, step=dataclasses.replace(st, regions=short))
        yield "label without {}", dataclasses.replace(t, label="x", step=dataclasses.replace(st, label=(0, 1)))
        yield "ranks step", dataclasses.replace(t, step=dataclasses.replace(
            st, regions=tuple((1, dr, dc) for _, dr, dc in st.regions) or ((1, 0, 0),) * len(regions)))
        yield "signals step by rank", dataclasses.replace(t, step=dataclasses.replace(
            st, signals=tuple((s.gpus_per_node, dx) for _, dx in st.signals)
            or ((s.gpus_per_node, 0),) * len(t.signals)))
        # members that wrap (Step.rotate): a wrap that takes regions or signals past their bounds or
        # node, or one the rules refuse (all the way round, backwards, with cycling signals or steps)
        yield "wraps", dataclasses.replace(t, step=dataclasses.replace(st, rotate=st.rotate + 1 if st.rotate + 1 < t.count
                                                                       else 0))
        yield "wraps half", dataclasses.replace(t, step=dataclasses.replace(st, rotate=t.count // 2))
        yield "unwrapped", dataclasses.replace(t, step=dataclasses.replace(st, rotate=0))
        yield "wraps all the way", dataclasses.replace(t, step=dataclasses.replace(st, rotate=t.count))
        yield "wraps backwards", dataclasses.replace(t, step=dataclasses.replace(st, rotate=-1))
        yield "wraps and cycles", dataclasses.replace(t, step=dataclasses.replace(
            st, rotate=1, period=1, outer=((0, 0),) * len(st.signals)))
        yield "wraps with waits that step", dataclasses.replace(t, step=dataclasses.replace(
            st, rotate=1, waits=(1,) * len(t.waits)))
        yield "wraps with a chunk that steps", dataclasses.replace(t, step=dataclasses.replace(st, rotate=1, chunk=1))
        if st.period:  # signals that cycle (a tile row's): a cycle's rank leaving the node, cycles not whole
            yield "cycles step by rank", dataclasses.replace(t, step=dataclasses.replace(
                st, outer=tuple((1, ox) for _, ox in st.outer)))
            yield "cycles step back by rank", dataclasses.replace(t, step=dataclasses.replace(
                st, outer=tuple((-1, ox) for _, ox in st.outer)))
            yield "a cycle cut short", dataclasses.replace(t, count=t.count - 1)
            yield "wraps a whole cycle", dataclasses.replace(t, step=dataclasses.replace(st, rotate=st.period))
            yield "wraps one more", dataclasses.replace(t, step=dataclasses.replace(
                st, rotate=(st.rotate + 1) % st.period))
            yield "cycles without steps", dataclasses.replace(t, step=dataclasses.replace(st, signals=(), outer=()))
    else:
        yield "a group without a step", dataclasses.replace(t, count=2)


@pytest.mark.parametrize("s", CASES, ids=[f"{s.kernel}/{s.variant}/{s.world}/{len(s.tasks)}" for s in CASES])
def test_mutations_are_not_cleared_where_the_rules_refuse_them(s, monkeypatch):
    rng = random.Random(len(s.tasks))
    ops = {}
    for p, t in enumerate(s.tasks):
        group = t.count > 1
        ops.setdefault((t.op, group, group and t.step.rotate > 0, group and t.step.period > 0), []).append(p)
    picks = [rng.choice(ps) for ps in ops.values()]
    refused = same = 0
    for p in picks:
        for name, bad in _mutations(s, s.tasks[p]):
            m = dataclasses.replace(s, tasks=s.tasks[:p] + (bad,) + s.tasks[p + 1:])
            try:
                ok = cleared(m, read_regions(m), signal_table(m))[p]
            except ValueError:  # a step that does not fit its regions: validate screens nothing then
                ok = False
            why = _rules(m, p)
            if why is not None:
                refused += 1
                assert not ok, f"{name} on {s.tasks[p].describe()} cleared, but the rules say: {why}"
            if rng.random() < 0.25:  # validate() as a whole, with and without the screen (sampled: it is slower)
                assert _verdict(m, True, monkeypatch) == _verdict(m, False, monkeypatch), name
                same += 1
    assert refused >= 5 * len(picks) and same > 0


def test_a_norm_whose_lse_is_two_wide_is_left_to_the_rules():
    """The norm's shape rule where a buffer's bounds do not imply it: an lse region two columns wide in a
    two-column buffer (the builders' LSE has one column, so no mutation of a build reaches this)."""
    from mkernel import ScheduleBuilder

    sb = ScheduleBuilder("norm", "fused", world=1, gpus_per_node=1, num_sms=8)
    for name, cols in (("ACC", 16), ("STATS", 2), ("OUT", 16), ("LSE", 2)):
        sb.buffer(name, 32, cols)
    sb.launch("k", {Role.COMPUTE: 1})
    for lse in (1, 2):
        sb.add(0, Role.COMPUTE, Op.NORM, reads=(Region("ACC", 0, 0, 32, 0, 16), Region("STATS", 0, 0, 32, 0, 2)),
               writes=(Region("OUT", 0, 0, 32, 0, 16), Region("LSE", 0, 0, 32, 0, lse)), label=f"lse {lse}")
    s = sb.build(0.0)
    assert list(cleared(s, read_regions(s), signal_table(s))) == [True, False]
    assert _rules(s, 0) is None and "norm shapes do not fit" in _rules(s, 1)


def test_an_operand_too_many_is_left_to_the_rules_where_the_shapes_line_up():
    """The operand counts of an attention tile and a norm, where the shape checks alone would pass: a
    head dimension (attention) or width (norm) chosen so that every region read in the wrong role has
    the shape that role wants. The first of each pair is valid and cleared; the second has one read
    too many, which the rules refuse."""
    from mkernel import ScheduleBuilder

    sb = ScheduleBuilder("counts", "fused", world=1, gpus_per_node=1, num_sms=8)
    for name, rows, cols in (("Q", 16, 2), ("K", 32, 2), ("V", 32, 2), ("ACC", 16, 2), ("STATS", 16, 2),
                             ("A1", 16, 1), ("OUT", 16, 1), ("LSE", 16, 1)):
        sb.buffer(name, rows, cols)
    sb.launch("k", {Role.COMPUTE: 1})
    q, k, v = Region("Q", 0, 0, 16, 0, 2), Region("K", 0, 0, 32, 0, 2), Region("V", 0, 0, 32, 0, 2)
    acc, stats = Region("ACC", 0, 0, 16, 0, 2), Region("STATS", 0, 0, 16, 0, 2)
    for reads in ((q, k, v), (q, k, v, q)):
        sb.add(0, Role.COMPUTE, Op.ATTN, reads=reads, writes=(acc, stats), label=f"attn {len(reads)}")
    a1, out, lse = Region("A1", 0, 0, 16, 0, 1), Region("OUT", 0, 0, 16, 0, 1), Region("LSE", 0, 0, 16, 0, 1)
    for reads in ((a1, stats), (a1, stats, a1)):
        sb.add(0, Role.COMPUTE, Op.NORM, reads=reads, writes=(out, lse), label=f"norm {len(reads)}")
    s = sb.build(0.0)
    assert list(cleared(s, read_regions(s), signal_table(s))) == [True, False, True, False]
    assert [_rules(s, p) is None for p in range(4)] == [True, False, True, False]


def test_a_mask_of_other_than_ints_is_left_to_the_rules():
    """A causal mask the rule would compare otherwise (None, a float) is not cleared, and the screen does
    not raise on it: validate's first error stays the one its rules name, wherever the mask sits."""
    from mkernel import ScheduleBuilder

    sb = ScheduleBuilder("masks", "fused", world=1, gpus_per_node=1, num_sms=8)
    for name, rows, cols in (("Q", 16, 2), ("K", 32, 2), ("V", 32, 2), ("ACC", 16, 2), ("STATS", 16, 2)):
        sb.buffer(name, rows, cols)
    sb.launch("k", {Role.COMPUTE: 1})
    regions = dict(reads=(Region("Q", 0, 0, 16, 0, 2), Region("K", 0, 0, 32, 0, 2), Region("V", 0, 0, 32, 0, 2)),
                   writes=(Region("ACC", 0, 0, 16, 0, 2), Region("STATS", 0, 0, 16, 0, 2)))
    for mask in ((4, 2), (None, 0), (4.5, 2)):
        sb.add(0, Role.COMPUTE, Op.ATTN, mask=mask, label=f"mask {mask}", **regions)
    s = sb.build(0.0)
    assert list(cleared(s, read_regions(s), signal_table(s))) == [True, False, False]
