"""The hazard tracker's grids (:class:`mkernel.sim.cellgrid.Cells`) against grids made region by region.

``Cells`` works on region records and member offsets, never on members, and takes shortcuts: a row
whose record does not step takes its record's cells, column edges are looked up in a table, a
row's cells are its first cell's neighbours, ``write_once`` sorts only cells written more than once.
The oracle here does none of that: it expands the schedule and, for every member's tracked region
(not an input's), finds its cell rectangle among the sorted edges of its (buffer, rank) grid, in
plain Python. Every array the tracker reads must equal it: the rows' grids and cells (reads and
writes), the expected writes per cell, each read cell's ``need`` and each entry's ``write_once``.
"""
from __future__ import annotations

import numpy as np

import pytest

from mkernel import Cluster, Workload
from mkernel.builders import get
from mkernel.ir import BufferKind, Op, Region, Role, Step, expand
from mkernel.schedule_builder import ScheduleBuilder
from mkernel.sim.cellgrid import Cells

W = Workload(m=512, n=1000, k=64, chunk_tiles=2, baseline_chunk_kib=64)  # n = 1000: ragged edge tiles


def _builds():
    for kernel, cluster in (("gemm_ar", Cluster("t", 2, 4)), ("gemm_ar", Cluster("t", 3, 2)),
                            ("gemm_rs", Cluster("t", 2, 2)), ("ag_gemm", Cluster("t", 2, 2)),
                            ("ring_attention", Cluster("t", 2, 2)), ("moe_dispatch_gemm", Cluster("t", 2, 2))):
        w = W if kernel.startswith(("gemm", "ag")) else Workload(kernel=kernel, m=256, n=64, k=32, tile_m=64,
                                                                experts=4, topk=2)
        m = get(kernel)
        for build in (m.build, m.build_baseline):
            yield pytest.param(build(w, cluster, grouped=True), id=f"{kernel}-{cluster.nodes}x{cluster.gpus_per_node}-"
                                                                   f"{build.__name__}")
    even = Workload(m=512, n=1024, k=64, chunk_tiles=2, baseline_chunk_kib=64)  # every column tile as wide
    yield pytest.param(get("gemm_rs").build(even, Cluster("t", 2, 2), grouped=True), id="gemm_rs-2x2-even-tiles")
    yield pytest.param(_rank_steps(), id="regions-stepping-in-rank")


def _rank_steps():
    """No builder's regions step in rank; this group's writes do, and wrap (members 0, 1, -1); a
    reduce reads several cells and writes one of them in place; and a group's reads step in rank
    alone while its members write one region twice."""
    sb = ScheduleBuilder("t", "rank-steps", 4, 4, 8, grouped=True)
    sb.buffer("X", 64, 64)
    sb.buffer("Y", 64, 64, kind=BufferKind.OUTPUT)
    sb.launch("k", {Role.INTRA: 8})
    sb.add(0, Role.INTRA, Op.COPY, reads=(Region("X", 0, 16, 32, 0, 64),), writes=(Region("Y", 1, 0, 16, 16, 32),),
           label="copy {}", count=3, step=Step(((0, 16, 0), (1, 0, 16)), label=(0, 1), rotate=1))
    sb.add(2, Role.INTRA, Op.REDUCE, reads=(Region("Y", 2, 0, 32, 0, 64),), writes=(Region("Y", 2, 0, 16, 32, 48),))
    # reads stepping in rank alone; both members write one region (not written once)
    sb.add(0, Role.INTRA, Op.COPY, reads=(Region("X", 0, 32, 48, 0, 16),), writes=(Region("Y", 3, 48, 64, 0, 16),),
           label="copy {}", count=2, step=Step(((1, 0, 0), (0, 0, 0)), label=(3, 1)))
    # a wrapping group that reads one region of several cells twice, between two others (a broadcast's
    # repeats), then a third time stepping the other way (no repeat)
    y = Region("Y", 1, 0, 32, 16, 48)
    sb.add(3, Role.INTRA, Op.COPY, reads=(Region("Y", 2, 0, 16, 16, 32), y, y, y, Region("Y", 0, 16, 32, 0, 16)),
           writes=(Region("Y", 3, 0, 16, 32, 48),), label="bcast {}", count=3,
           step=Step(((0, 0, 16), (0, 0, 16), (0, 0, 16), (0, 0, -16), (0, 16, 0), (0, 0, 0)), label=(5, 1), rotate=1))
    return sb.build(0.0)


def _oracle(s):
    """(read grids, read cells per row, write grids, write cells per row, need per read cell, write_once),
    region by region over the expanded schedule."""
    inputs = {b.name for b in s.buffers if b.kind is BufferKind.INPUT}
    code = {b.name: i for i, b in enumerate(s.buffers)}
    flat = expand(s).tasks
    entry_of = [p for p, t in enumerate(s.tasks) for _ in range(t.count)]
    tracked = [([r for r in t.reads if r.buffer not in inputs], [r for r in t.writes if r.buffer not in inputs])
               for t in flat]
    keys = sorted({(code[r.buffer], r.rank) for rs, ws in tracked for r in rs + ws})
    grid = {k: g for g, k in enumerate(keys)}
    rows = {k: sorted({x for rs, ws in tracked for r in rs + ws if (code[r.buffer], r.rank) == k
                       for x in (r.row0, r.row1)}) for k in keys}
    cols = {k: sorted({x for rs, ws in tracked for r in rs + ws if (code[r.buffer], r.rank) == k
                       for x in (r.col0, r.col1)}) for k in keys}
    base, at = {}, 0
    for k in keys:
        base[k] = at
        at += max(len(rows[k]) - 1, 0) * max(len(cols[k]) - 1, 0)

    def cells(r):
        k = (code[r.buffer], r.rank)
        width = len(cols[k]) - 1
        return [base[k] + a * width + b for a in range(rows[k].index(r.row0), rows[k].index(r.row1))
                for b in range(cols[k].index(r.col0), cols[k].index(r.col1))]

    side = {"read": ([], []), "write": ([], [])}
    for rs, ws in tracked:
        for name, regions in (("read", rs), ("write", ws)):
            side[name][0].extend(grid[(code[r.buffer], r.rank)] for r in regions)
            side[name][1].extend(cells(r) for r in regions)
    expected = np.bincount([c for cs in side["write"][1] for c in cs], minlength=at)
    need = []
    for t, (rs, ws) in zip(flat, tracked):  # a member's own writes do not count against its reads (a put's do)
        own = [] if t.op is Op.PUT else [c for w in ws for c in cells(w)]
        need.extend(int(expected[c]) - own.count(c) for r in rs for c in cells(r))
    once = [True] * len(s.tasks)
    seen: dict[int, set] = {}
    for p, (_, ws) in zip(entry_of, tracked):
        for c in (c for w in ws for c in cells(w)):
            once[p] = once[p] and c not in seen.setdefault(p, set())
            seen[p].add(c)
    return side, expected, need, once


@pytest.mark.parametrize("s", list(_builds()))
def test_cells_equal_the_grids_made_region_by_region(s):
    c = Cells(s)
    side, expected, need, once = _oracle(s)
    for name, got in (("read", c.read), ("write", c.write)):
        grids, cells = side[name]
        assert got.grid.tolist() == grids, name
        assert np.diff(got.start).tolist() == [len(x) for x in cells], name
        assert got.cell.tolist() == [x for xs in cells for x in xs], name
    assert c.total == len(expected) and c.expected.tolist() == expected.tolist()
    assert c.need.tolist() == need
    assert c.write_once == once
    _distinct_reads_are_every_read_less_its_repeats(s, c)


def _distinct_reads_are_every_read_less_its_repeats(s, c):
    """``distinct`` and ``distinct_need`` (all a verdict reads): each entry's reads less those that
    repeat the one before them, member by member, with their grids, cells and need."""
    d, every = c.distinct, c.read
    inputs = {b.name for b in s.buffers if b.kind is BufferKind.INPUT}
    kept = []  # every read row that a distinct row stands for, in order
    for p, t in enumerate(s.tasks):
        regions = [r for r in t.reads if r.buffer not in inputs]
        steps = [t.step.regions[k] if t.count > 1 else None for k, r in enumerate(t.reads) if r.buffer not in inputs]
        first = [j for j in range(len(regions)) if j == 0 or (regions[j], steps[j]) != (regions[j - 1], steps[j - 1])]
        assert d.n[p] == len(first)
        kept += [int(every.base[p]) + i * len(regions) + j for i in range(t.count) for j in first]
    assert d.grid.tolist() == every.grid[kept].tolist()
    assert np.diff(d.start).tolist() == np.diff(every.start)[kept].tolist()
    cells = np.concatenate([np.arange(every.start[r], every.start[r + 1]) for r in kept] + [np.zeros(0, int)])
    assert d.cell.tolist() == every.cell[cells].tolist() and c.distinct_need.tolist() == c.need[cells].tolist()


def test_the_builds_take_every_shortcut(monkeypatch):
    """The builds above reach each path of ``Cells``: wrapped groups, records that step in rank, rows
    of several cells, cells written more than once, column edges from the table, row edges searched,
    sides whose rows along an axis are keyed from their records (``Stepped``) and sides listed; each
    way ``_by_record`` fills a per-row column (one number, a few records' rows looked up, every row
    looked up), the need with and without a member's own writes, and every cell written once or not."""
    from mkernel.sim import cellgrid
    from mkernel.sim.gridrows import Rows

    kinds, along, by_record, own = set(), Rows.along, cellgrid._by_record, Cells._own
    fills, owns = set(), set()

    def spy(self, axis):
        got = along(self, axis)
        kinds.add(type(got[1]).__name__)
        return got

    def spy_fill(rows, x):
        odd = np.flatnonzero(x != x[0]) if len(x) else x
        fills.add("one" if len(x) and not len(odd) else "few" if len(x) and 4 * int(rows.members[odd].sum())
                  <= len(rows.rec) else "take")
        return by_record(rows, x)

    def spy_own(read, r, rects):
        got = own(read, r, rects)
        owns.add(got is None)
        return got

    monkeypatch.setattr(Rows, "along", spy)
    monkeypatch.setattr(cellgrid, "_by_record", spy_fill)
    monkeypatch.setattr(Cells, "_own", staticmethod(spy_own))
    builds = [p.values[0] for p in _builds()]
    grids = [Cells(s) for s in builds]
    assert kinds == {"Stepped", "tuple"} and fills == {"one", "few", "take"} and owns == {True, False}
    assert any(np.count_nonzero(c.expected) == c.total == len(c.write.cell) for c in grids)
    assert any(t.count > 1 and t.step.rotate for s in builds for t in s.tasks)
    assert any(t.count > 1 and any(r[0] for r in t.step.regions) for s in builds for t in s.tasks)
    assert any((np.diff(c.read.start) > 1).any() and (np.diff(c.write.start) > 1).any() for c in grids)
    assert any((c.expected > 1).any() for c in grids)
    assert any(c._repeat is not None and (np.diff(c.distinct.start) > 1).any() for c in grids)  # (repeats of several cells)
    assert any(c._repeat is None for c in grids)
    assert any(c.cols._below is not None for c in grids) and any(c.rows._below is None for c in grids)


@pytest.mark.parametrize("width", [40, 4000, 400_000])  # marked with a table, marked grid by grid, sorted
def test_edges_number_each_grids_edges_as_a_sort_of_them_does(width):
    """The edge layouts (every grid as wide as the widest, marked; each grid as wide as its own,
    marked; sorted) against each grid's edges sorted apart: the same cells per grid, and every edge's
    index among its grid's."""
    from mkernel.sim.gridedges import Edges

    rng = np.random.default_rng(width)
    count = 6
    tops = [width, width // 20 + 1, 3, width, 1, width // 3 + 1]  # (grid 4: no edges at all)
    grids, values = [], []
    for piece in range(3):
        g = rng.choice([0, 1, 2, 3, 5], 300)
        grids.append(g)
        values.append(rng.integers(0, np.array(tops)[g]))
    edges = Edges(grids, values, count)
    for gi in range(count):
        own = np.unique(np.concatenate([v[g == gi] for g, v in zip(grids, values)]))
        assert edges.cells[gi] == max(len(own) - 1, 0)
        assert (edges.local(np.full(len(own), gi), own) == np.arange(len(own))).all()


@pytest.mark.parametrize("seed", range(24))
def test_edges_found_from_slots_and_stepped_rows_are_the_listed_edges(seed):
    """``Edges.found`` (the grids' making: keys divided by the values' lowest common bit, rows keyed
    from their records and offsets without being listed, looked up as marked) against ``Edges`` of
    every value listed, on random layouts: the same edges and layout, array for array, and each
    value's index is its key's place among the edges (a search of them). Seeds cover every grid as
    wide (marked with a table), each as wide as its own edges, too many slots to mark (sorted),
    negative values (no division), steps of either sign and members past a wrap (negative offsets);
    seeds from 12 on give each stepped side's records one width (its second keys moved as a whole)."""
    from mkernel.sim.cellgrid import Stepped
    from mkernel.sim.gridedges import Edges

    rng = np.random.default_rng(seed)
    count = 5
    unit = 1 << int(rng.integers(0, 8))  # the values' common power of two
    wide = [40, 4000, 400_000][seed % 3]
    floor = -wide if seed % 4 == 3 else 0
    grids, values, listed_g, listed_v, stepped = [], [], [], [], []
    for piece in range(2):  # listed values
        g = rng.choice([0, 1, 3, 4], 200)
        v = rng.integers(floor // unit, wide // unit + 2, 200) * unit
        grids.append(g)
        values.append(v)
    for piece in range(2):  # stepped rows: per record a grid, bounds and step, and rows of its members
        recs = 50
        grid = rng.choice([0, 1, 3, 4], recs)
        lo = rng.integers(floor // unit, wide // unit + 2, recs) * unit + (0 if floor else 15 * unit)  # (>= 0 but
        hi = lo + rng.integers(0, 8, 1 if seed >= 12 else recs) * unit  # where negative values are asked for: 5 members of 3 steps back)
        step = rng.integers(-3, 4, recs) * unit
        members = rng.integers(1, 6, recs)
        rec = np.repeat(np.arange(recs), members)
        off = np.concatenate([np.arange(m) - (rng.integers(0, m) if m > 2 and rng.random() < 0.3 else 0)
                              for m in members])  # (some wrapped: offsets below 0)
        least, most = np.full(recs, 10 ** 9), np.full(recs, -10 ** 9)
        np.minimum.at(least, rec, step[rec] * off)
        np.maximum.at(most, rec, step[rec] * off)
        stepped.append(Stepped(grid, lo, hi, step, rec, off, least, most))
        grids += [grid] * 2
        values += [lo, hi]  # (the records' own, as Cells lists them)
        listed_g += [grid[rec]] * 2
        listed_v += [lo[rec] + step[rec] * off, hi[rec] + step[rec] * off]
    size = sum(v.size for v in values + listed_v)
    plain = Edges(grids + listed_g, values + listed_v, count, size)
    wanted = [bool(rng.random() < 0.7) for _ in values]
    made, found = Edges.found(list(grids), list(values), count, size, wanted, stepped)
    for name in ("offset", "u", "first", "cells", "_span", "_below"):
        a, b = getattr(plain, name), getattr(made, name)
        assert (a is None and b is None) or (np.array_equal(a, b) and np.asarray(a).dtype == np.asarray(b).dtype), name
    want = [np.searchsorted(plain.u, plain._key(g, v)) for g, v in zip(grids + listed_g, values + listed_v)]
    assert len(found) == len(values) + len(listed_v)
    widths = [j for j, got in enumerate(found) if isinstance(got, int)]  # (a second bound given as the first's plus an int)
    assert all(j >= len(values) and (j - len(values)) % 2 for j in widths) and bool(widths) == (seed in (12, 18, 20))
    found = [found[j - 1] + got if j in widths else got for j, got in enumerate(found)]
    for j, got in enumerate(found):
        if j < len(values) and not wanted[j]:
            assert got is None
        else:
            assert np.array_equal(got, want[j]), j
    every_g, every_v = np.concatenate(grids + listed_g), np.concatenate(values + listed_v)  # an oracle of its own:
    if floor < 0:  # (negative edges: no valid schedule has them, validate refuses negative bounds)
        return
    assert every_v.min() >= 0
    for j, (g, v) in enumerate(zip(grids + listed_g, values + listed_v)):  # each value's place among its grid's
        if found[j] is not None:
            own = [np.searchsorted(np.unique(every_v[every_g == x]), y) for x, y in zip(g.tolist(), v.tolist())]
            assert np.array_equal(found[j] - made.first[g], own), j


def _far_bounds():
    """Regions whose bounds reach near 2^31 (the region table still 32-bit): rows and columns that
    step by 2^29, a width of 2^30, a second buffer's grid keyed past the first's."""
    top = 2 ** 31 - 1
    sb = ScheduleBuilder("t", "far", 4, 4, 8, grouped=True)
    sb.buffer("X", top, top)
    sb.buffer("Y", top, top, kind=BufferKind.OUTPUT)
    sb.launch("k", {Role.INTRA: 8})
    big = 2 ** 29
    sb.add(3, Role.INTRA, Op.COPY, reads=(Region("X", 3, 0, big, top - 2 ** 30, top),),
           writes=(Region("Y", 3, big, 2 * big, 0, big),), label="copy {}", count=3,
           step=Step(((0, big, 0), (0, 0, big)), label=(0, 1)))
    sb.add(3, Role.INTRA, Op.REDUCE, reads=(Region("Y", 3, 0, top, 0, top),),
           writes=(Region("X", 3, top - 1, top, 0, 1),))
    return sb.build(0.0)


@pytest.mark.parametrize("s", list(_builds()) + [pytest.param(_far_bounds(), id="far-bounds")])
def test_cells_from_a_32_bit_table_are_those_from_its_64_bit_copy(s):
    """Cells keeps the region table's own numbers (32-bit where they fit) and makes the rows' numbers
    64-bit by what they meet: every array equals the one made from the table widened to 64-bit."""
    from mkernel.members import read_regions

    recs, fields, codes = read_regions(s)
    assert recs.dtype == np.int32
    a, b = Cells(s, (recs, fields, codes)), Cells(s, (recs.astype(np.int64), fields, codes))
    for name in ("read", "write"):
        for f in ("base", "n", "grid", "start", "cell"):
            x, y = getattr(getattr(a, name), f), getattr(getattr(b, name), f)
            assert x.dtype == y.dtype and np.array_equal(x, y), (name, f)
    for f in ("expected", "need", "grid_base", "grid_rank", "uid0", "read_pos"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    assert a.grid == b.grid and a.write_once == b.write_once
    assert all(np.array_equal(getattr(a, ax).u, getattr(b, ax).u) for ax in ("rows", "cols"))


def _wraps_after_others():
    """Wrapping groups after a group of several members and regions, and after an entry with no
    tracked regions (whose records end where the next entry's begin)."""
    sb = ScheduleBuilder("t", "wraps", 2, 2, 8, grouped=True)
    sb.buffer("X", 64, 64)
    sb.buffer("Y", 64, 64, kind=BufferKind.OUTPUT)
    sb.launch("k", {Role.INTRA: 8})
    sb.add(0, Role.INTRA, Op.COPY, reads=(Region("X", 0, 0, 16, 0, 8), Region("X", 0, 0, 16, 8, 16)),
           writes=(Region("Y", 0, 0, 16, 0, 8), Region("Y", 0, 0, 16, 8, 16)), label="copy {}", count=3,
           step=Step(((0, 16, 0),) * 4, label=(0, 1)))
    for rank in (0, 1):
        sb.add(rank, Role.INTRA, Op.COPY, reads=(Region("X", rank, 16, 32, 32, 48),),
               writes=(Region("Y", rank, 16, 32, 32, 48),), label="wrap {}", count=4,
               step=Step(((0, 16, 0), (0, 16, 0)), label=(0, 1), rotate=1))
        sb.add(rank, Role.INTRA, Op.NOP, label="between")
    return sb.build(0.0)


@pytest.mark.parametrize("s", list(_builds()) + [pytest.param(_wraps_after_others(), id="wraps-after-others")])
def test_wrapped_rows_offsets_and_extremes_are_those_listed_row_by_row(s):
    """Rows finds the rows of wrapping records from their entries (base + i n + j) and each record's
    least and most offset run by run; the reference lists every row's record and offset
    (:func:`mkernel.members.member_slots`, :func:`mkernel.members.offsets`) and reduces them by record."""
    from mkernel.members import member_slots, offsets, read_regions
    from mkernel.sim.gridrows import Rows

    recs, fields, _ = read_regions(s)
    counts = np.array([t.count for t in s.tasks], np.int64)
    for side in (fields["read"], ~fields["read"]):
        kept = recs[side]
        per = np.bincount(fields["entry"][side], minlength=len(s.tasks))
        rows = Rows(kept, per, counts)
        _, rec, i = member_slots(per, counts)
        off = offsets(i, kept[rec, 9], kept[rec, 10])
        least, most = np.zeros(len(kept), np.int64), np.repeat(counts, per) - 1
        wraps = kept[:, 9] > 0
        least[wraps], most[wraps] = np.iinfo(np.int64).max, np.iinfo(np.int64).min
        np.minimum.at(least, rec[wraps[rec]], off[wraps[rec]])
        np.maximum.at(most, rec[wraps[rec]], off[wraps[rec]])
        assert rows.off.tolist() == off.tolist() and rows.least.tolist() == least.tolist()
        assert rows.most.tolist() == most.tolist()


def test_cells_repeated_by_insertion_are_numpy_s_repeat():
    """cellgrid._repeat (the rows' first cells over their cells) against np.repeat: sizes of one
    with a few larger (inserted), some zero (repeated), none at all, all larger than one."""
    from mkernel.sim.cellgrid import _repeat

    rng = np.random.default_rng(5)
    for trial in range(60):
        n = int(rng.integers(0, 40))
        size = np.ones(n, np.int64)
        size[rng.integers(0, max(n, 1), int(rng.integers(0, 6)))[:n]] = rng.integers(2, 5)
        if trial % 3 == 1 and n:
            size[int(rng.integers(0, n))] = 0
        if trial % 5 == 4:
            size = rng.integers(2, 4, n)
        x = rng.integers(0, 1000, n).astype(np.int32)
        got = _repeat(x, size, np.flatnonzero(size > 1))
        assert got.dtype == x.dtype and np.array_equal(got, np.repeat(x, size)), (size, x)


def test_cells_counted_by_marks_are_numpy_s_bincount():
    """cellgrid._counts (each cell's writes, marked where none is written twice) against np.bincount:
    cells each listed once (marked), some twice (counted), none, and cells of none listed."""
    from mkernel.sim.cellgrid import _counts

    rng = np.random.default_rng(7)
    for trial in range(60):
        total = int(rng.integers(0, 50))
        cell = rng.permutation(total)[:int(rng.integers(0, total + 1))]
        if trial % 3 == 1 and len(cell):
            cell = np.concatenate([cell, cell[rng.integers(0, len(cell), int(rng.integers(1, 4)))]])
        cell = rng.permutation(cell).astype(np.int32)
        got = _counts(cell, total)
        assert got.dtype == np.int32 and np.array_equal(got, np.bincount(cell, minlength=total)), (cell, total)
