"""The logged hazard tracker (sim/hazardlog.py): a run's checks and landings logged, the verdict
decided at the end in one vectorized count, the live tracker replayed only where a read came up short.

The oracle is the live tracker (sim/hazards.py ArrivalTracker) run in the same model: its hazards
must be the logged tracker's, in order, on correct schedules and on seeded bugs (guarding waits
dropped or undercounted, plain and stressed, SRD flags that overtake their data, a drain that
lets the kernel end before its outputs land); and the
vectorized verdict alone must say "short" exactly where the live tracker found a hazard, so a run
without hazards never replays and one with them always does.
"""
from __future__ import annotations

import dataclasses

import pytest

from mkernel import Cluster, DeadlockError, Wait, Workload
from mkernel.builders import get
from mkernel.sim.engine import Model
from mkernel.sim.hazardlog import LoggedTracker
from mkernel.sim.hazards import ArrivalTracker

W = Workload(m=512, n=1024, k=64, chunk_tiles=2, baseline_chunk_kib=64)
GUARDS = ("contrib", "final", "arrived", "chunk_ready", ".rs", ".ag", "l1_done", "l2_done", "block_done", "out_done",
          "done")


def _weakened(s, every: int = 12):
    """Copies of ``s`` with one guarding wait dropped or counted one short (every ``every``-th)."""
    out, seen = [], 0
    for t in s.tasks:
        if not t.waits or not any(g in t.waits[-1].signal.name for g in GUARDS):
            continue
        seen += 1
        if seen % every:
            continue
        w = t.waits[-1]
        for changed in (t.waits[:-1], t.waits[:-1] + (Wait(w.signal, w.count - 1),) if w.count > 1 else None):
            if changed is not None:
                tasks = s.tasks[:t.id] + (dataclasses.replace(t, waits=changed),) + s.tasks[t.id + 1:]
                out.append(dataclasses.replace(s, tasks=tasks))
    return out


def _cases():
    for nodes, gpus, transport, notify in ((2, 2, "ib_rc", "auto"), (2, 2, "efa_srd", "flag"), (1, 4, "ib_rc", "auto")):
        c = Cluster("t", nodes, gpus, transport=transport, notify=notify)
        m = get("gemm_ar")
        for s in (m.build(W, c, grouped=True), m.build_baseline(W, c, grouped=True), m.build(W, c)):
            for case in [s] + _weakened(s):
                for seed, stress in ((0, 0.0), (1, 3.0)):
                    yield case, c, seed, stress


def _run(s, c, seed: float, stress: float, tracker):
    model = Model(s, c, None, seed=seed, stress=stress, tracker=tracker)  # (made for what runs: s expanded if stressed)
    try:
        model.run()
    except DeadlockError:
        return None
    return model.tracker


class _Recording(LoggedTracker):
    """The logged tracker, keeping its vectorized verdict."""

    def finish(self) -> None:
        self.verdict = self._verdict(*self._calls())
        super().finish()


def test_the_logged_verdict_and_hazards_are_the_live_trackers():
    short = clean = 0
    for s, c, seed, stress in _cases():
        live = _run(s, c, seed, stress, ArrivalTracker)
        if live is None:
            continue  # a deadlock: no hazards are read
        logged = _run(s, c, seed, stress, _Recording)
        assert logged.verdict == bool(live.hazards), f"{s.kernel}/{s.variant} seed {seed} stress {stress}"
        assert logged.hazards == live.hazards
        short += logged.verdict
        clean += not logged.verdict
    assert short >= 10 and clean >= 10, (short, clean)


@pytest.mark.parametrize("variant", ["fused", "baseline"])
def test_a_run_without_hazards_never_replays(variant, monkeypatch):
    c = Cluster("t", 2, 2)
    m = get("gemm_ar")
    s = m.build(W, c, grouped=True) if variant == "fused" else m.build_baseline(W, c, grouped=True)
    monkeypatch.setattr(LoggedTracker, "_replay", lambda self: pytest.fail("replayed a run without hazards"))
    model = Model(s, c, None)
    model.run()
    assert model.tracker.hazards == []


def test_landings_say_fewer_exactly_where_a_count_of_the_log_does():
    """The verdict's lookup (a cell's need-th landing before the check) against counting the
    landings logged before each check, cell by cell, on random logs where cells land 0 to 3 times; and a
    need of one number viewed over every check (0, 1 or 2) as the same need listed. Planted error tried:
    a viewed need read as 1 whatever its number."""
    import numpy as np

    from mkernel.sim.hazardlog import _Landings

    rng = np.random.default_rng(7)
    for _ in range(400):
        total, size = int(rng.integers(1, 12)), int(rng.integers(0, 30))
        cell = rng.integers(0, total, size)
        if _ % 4 == 3:  # every cell landed exactly once (the verdict's own path: _Landings.once)
            size, cell = total, rng.permutation(total)
        at = np.sort(rng.integers(0, 60, size))  # landings in log order
        landings = _Landings(cell, at, total)
        assert landings.once == (_ % 4 == 3 or (size == total and len(set(cell.tolist())) == total))
        checked = rng.integers(0, total, 8)
        need = rng.integers(0, 4 if _ % 16 != 3 else 2, 8)  # (at most one, some none: a read of its own write)
        when = rng.integers(0, 70, 8) if _ % 2 else int(rng.integers(0, 70))  # per check, or one (a rank's end)
        if _ % 16 == 11:  # one check, for two landings, after every landing: short of one landing alone
            need, when = np.r_[2, np.zeros(7, np.int64)], 100
        if _ % 8 == 7:  # each cell checked for one landing at a landing's own position ("before" is strict)
            j = rng.integers(0, size, 8)
            checked, need, when = cell[j], np.ones(8, np.int64), at[rng.permutation(j) if _ % 16 == 7 else j]
        whens = np.broadcast_to(when, (8,))
        by_count = any(n > 0 and ((cell == c) & (at < w)).sum() < n for c, n, w in zip(checked, need, whens))
        assert landings.fewer(checked, need, when) == by_count
        for one in range(3):  # one need viewed over every check (Cells' ones where every cell is written once)
            same = np.broadcast_to(np.full(1, one), (8,))
            assert landings.fewer(checked, same, when) == landings.fewer(checked, np.full(8, one), when)
        perm = rng.permutation(size)  # (landings given span by span in cell order, not in log order: the same)
        assert _Landings(cell[perm], at[perm], total).fewer(checked, need, when) == by_count


@pytest.mark.parametrize("width", ["int64", "int32"])
@pytest.mark.parametrize("packed", [True, False])
def test_logged_spans_cover_the_cells_they_list(packed, width, monkeypatch):
    """LoggedTracker._spans against listing every logged span's cell indices one by one: spans that
    cover every index once (in any log order; some empty) come back as None and each index's
    position, the rest (a gap at the start, in the middle or at the end; an overlap; a span logged
    twice; a span moved onto another: a gap and an overlap of one size) as the indices themselves.
    Both ways of ordering the spans by start: the packed sort, and the argsort it stands for past
    PACKED_BITS (forced here by a bound of 0). The cells' starts and the log positions in 64 and 32 bits
    (Cells keeps its starts in the cells' own numbers; the verdict's positions are 32-bit where they fit).
    Planted error tried: the argsort's order reversed."""
    import types

    from mkernel.sim import hazardlog

    if not packed:
        monkeypatch.setattr(hazardlog, "PACKED_BITS", 0)

    import numpy as np

    rng = np.random.default_rng(11)
    for trial in range(300):
        members = int(rng.integers(1, 9))
        start = np.zeros(members + 1, width)
        np.cumsum(rng.integers(0, 4, members), out=start[1:])  # each member's cells (some none)
        side = types.SimpleNamespace(n=np.ones(1, np.int64), base=np.zeros(1, np.int64), start=start,
                                     cell=np.arange(start[-1]))
        cuts = np.unique(np.r_[0, rng.integers(0, members + 1, int(rng.integers(0, members))), members])
        spans = [(int(a), int(b - a)) for a, b in zip(cuts[:-1], cuts[1:])]  # a partition of the members
        kind = trial % 5
        if kind == 1 and len(spans) > 1:
            del spans[int(rng.integers(0, len(spans)))]  # a gap (first, middle or last)
        elif kind == 2:
            spans.append(spans[int(rng.integers(0, len(spans)))])  # a span logged twice
        elif kind == 3:
            a = int(rng.integers(0, members))
            spans.append((a, int(rng.integers(1, members - a + 1))))  # an overlap
        elif kind == 4 and len(spans) > 1:
            moved = spans.pop(int(rng.integers(0, len(spans))))  # a gap, and the same span over another's members
            spans.append((int(rng.integers(0, members - moved[1] + 1)), moved[1]))
        order = rng.permutation(len(spans))
        rows = np.array([(0, *spans[i], 0.0) for i in order], float).reshape(-1, 4)
        seq = np.arange(len(rows), dtype=width) * 3 + 1
        listed = sorted((s, int(q)) for (_, f, n, _), q in zip(rows.astype(int).tolist(), seq)
                        for s in range(start[f], start[f + n]))
        idx, at = LoggedTracker._spans(*(rows[:, f].astype(np.int64) for f in range(3)), seq, side)
        got = sorted(zip(range(len(at)) if idx is None else idx.tolist(), at.tolist()))
        assert got == listed, (spans, idx)
        whole = sorted(s for s, _ in listed) == list(range(start[-1]))
        assert (idx is None) == whole, (spans, start)  # (vacuously whole where there are no indices)


def test_logged_tasks_are_found_as_by_their_objects():
    """LoggedTracker._entries (by id, checked to be the very object there) against looking every
    logged task up by object: entries, plain members made by member() (ids past the entries and
    within them), and schedules whose ids are not their positions (two swapped, one negative); member()
    of a task equal to an entry but not one is refused (it indexed the grid with None before)."""
    import numpy as np

    c = Cluster("t", 2, 2)
    s = get("gemm_ar").build(W, c, grouped=True)
    swapped = list(s.tasks)
    swapped[1], swapped[2] = swapped[2], swapped[1]
    negative = list(s.tasks)
    negative[-1] = dataclasses.replace(negative[-1], id=-1)
    rng = np.random.default_rng(3)
    for sched in (s, dataclasses.replace(s, tasks=tuple(swapped)), dataclasses.replace(s, tasks=tuple(negative))):
        tracker = LoggedTracker(sched)
        plain = [t for t in sched.tasks if t.count == 1]
        members = [tracker.member(t, 0) for t in plain[:3]] + [plain[0].member(0, 0), plain[0].member(0, 2)]
        for logged in (list(sched.tasks), [sched.tasks[i] for i in rng.integers(0, len(sched.tasks), 50)] + members):
            by_object = {id(t): p for p, t in enumerate(sched.tasks)}
            assert tracker._entries(logged).tolist() == [by_object.get(id(t), -1) for t in logged]
        assert [tracker.member(t, 1).id for t in sched.tasks if t.count > 1] == \
            [int(tracker.cells.uid0[p]) + 1 for p, t in enumerate(sched.tasks) if t.count > 1]
        with pytest.raises(ValueError, match="is not an entry of the tracked schedule"):
            tracker.member(dataclasses.replace(sched.tasks[0]), 0)  # (equal to an entry, but not one)


def test_logged_times_are_packed_as_numpy_reads_them():
    """The log's times (LoggedTracker._calls) packed by struct as numpy converts a list into a float
    column, bit for bit (floats, ints, bools, numpy scalars, -0.0, inf, nan); a list that holds no
    number, or one too large, is left to numpy (which refuses it as it did)."""
    import numpy as np

    from mkernel.sim.hazardlog import _floats

    values = [1.5, 2, True, np.float64(3.25), np.float32(0.1), 10 ** 20, -0.0, float("inf"), float("nan"), np.int64(7)]
    column = np.empty((len(values), 4))
    column[:, 3] = values
    assert _floats(values).tobytes() == np.ascontiguousarray(column[:, 3]).tobytes()
    for bad in (["x"], [1.0, None], [10 ** 400]):
        assert _floats(bad) is bad
