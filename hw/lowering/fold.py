"""Folded norms: which attention NORMs a plan runs inside their tile's last merge.

A folded NORM's tile writes out and lse from registers in its last merge (the tile's lock counts
the merges), so the fp32 accumulator is neither stored nor read back and the NORM's claim goes
(:mod:`plan`). That runs the NORM at another time than the schedule does: right after its tile's
last merge rather than once its waits are met. The fold is sound when nothing can tell:

- the NORM reads exactly what each merge of its tile writes, waits for every one of them, and
  signals nothing (nobody waits for it);
- each of its waits is for every bump its slot gets in a call, and every merge of the tile bumps
  one of those slots, so the NORM runs after all of them and never sooner in the schedule;
- no task but the tile's merges and the NORM touches the NORM's rows (its accumulator and its
  output), on any rank: so whatever else it waits for (causal attention on several nodes pairs the
  counters of its two zigzag halves' tiles, builders/ring_attention.py) shares no data with it,
  and moving the NORM before those tasks changes no value, and no one else reads the accumulator
  the fold stops storing.
"""
from __future__ import annotations

import numpy as np

from mkernel.ir import Op, Region, Role, Schedule, Task

from .lower import Lowered

Tile = tuple[str, int]  # (accumulator buffer, first row)


def tile(task: Task) -> Tile:
    """The attention accumulator an ATTN merges into or a NORM reads."""
    acc = task.writes[0] if task.op is Op.ATTN else task.reads[0]
    return acc.buffer, acc.row0


def folded_norms(s: Schedule, low: Lowered) -> dict[Tile, tuple[Task, int]]:
    """Tile -> (its NORM, merges per call), for each NORM of ``low``'s rank that the rules of this
    module let run inside its tile's last merge."""
    table = low.roles.get(Role.COMPUTE)
    if table is None:
        return {}
    tasks = [s.tasks[int(t)] for t in table.task_ids]
    merges: dict[Tile, list[Task]] = {}
    for t in tasks:
        if t.op is Op.ATTN:
            merges.setdefault(tile(t), []).append(t)
    slot_of = {sig: i for i, sig in enumerate(low.slot_names)}
    candidates = {}
    for t in tasks:
        merged = merges.get(tile(t)) if t.op is Op.NORM else None
        if not merged or t.signals or not t.waits or any(a.writes != t.reads for a in merged):
            continue
        waited = {w.signal for w in t.waits}
        slots = [slot_of.get(w.signal) for w in t.waits]
        if None not in slots and all(w.count == low.slot_bumps[i] for w, i in zip(t.waits, slots)) \
                and all(any(sig in waited for sig in a.signals) for a in merged):
            candidates[tile(t)] = (t, merged)
    shared = _shared_rows(s, candidates)
    return {k: (norm, len(merged)) for k, (norm, merged) in candidates.items() if k not in shared}


def _shared_rows(s: Schedule, candidates: dict[Tile, tuple[Task, list[Task]]]) -> set[Tile]:
    """The candidate tiles whose NORM's rows some other task touches: a task of any rank, other
    than the NORM and its tile's merges, with a region over one of those rows (columns are not
    compared, which can only refuse a fold), or another candidate's NORM on the same rows."""
    keys = list(candidates)
    rows_of = {b.name: b.rows for b in s.buffers}
    owner: dict[tuple[str, int], np.ndarray] = {}  # (buffer, rank) -> candidate index per row, -1 none
    exact: dict[tuple[str, int, int, int], int] = {}  # a NORM's region rows -> its candidate
    member: dict[int, int] = {}  # task id -> the candidate whose NORM or merge it is
    shared: set[int] = set()
    for i, k in enumerate(keys):
        norm, merged = candidates[k]
        member.update((t.id, i) for t in (norm, *merged))
        for r in norm.reads + norm.writes:
            if (r.buffer, r.rank) not in owner:
                owner[(r.buffer, r.rank)] = np.full(rows_of[r.buffer], -1, dtype=np.int64)
            rows = owner[(r.buffer, r.rank)]
            _touch(rows, r, i, shared)
            rows[r.row0:r.row1] = i
            exact[(r.buffer, r.rank, r.row0, r.row1)] = i
    if owner:
        for t in s.tasks:
            own = member.get(t.id)
            for r in t.reads + t.writes:
                rows = owner.get((r.buffer, r.rank))
                # fast path: the NORM's own rows, which no other candidate's overlap unmarked
                if rows is not None and (own is None or exact.get((r.buffer, r.rank, r.row0, r.row1)) != own):
                    _touch(rows, r, own, shared)
    return {keys[i] for i in shared}


def _touch(rows: np.ndarray, r: Region, own: int | None, shared: set[int]) -> None:
    """Mark the candidates whose rows ``r`` covers, but ``own`` (the candidate the task serves);
    with them ``own`` itself, whose rows it would then share."""
    seen = rows[r.row0:r.row1]
    if not len(seen) or seen.max() < 0:
        return
    hit = [int(j) for j in np.unique(seen[seen >= 0]) if j != own]
    shared.update(hit)
    if hit and own is not None:
        shared.add(own)
