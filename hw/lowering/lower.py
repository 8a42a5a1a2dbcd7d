"""Lowering: a fused Schedule becomes the tables one rank's persistent kernel walks.

Why tables: the device code must not know any op's schedule. Tile order, chunk membership, peers,
what to wait for and what to bump all live in the schedule; lowering packs them into flat integer
arrays (one queue per role, in queue order) so a change of tile order or chunk size reaches the GPU
with no kernel edit.

Per rank:
- ``tasks``: one row per task of each role queue: op, chunk, and [start, end) into the region, wait
  and signal arrays (CSR layout; the columns: :class:`QueueTask`).
- ``regions``: buffer id, owning rank, rows and columns of each operand (reads, then writes).
- ``waits``: (slot, count) on this rank's signal slots; ``signals``: (target rank, slot there).
- ``slot_bumps``: per slot of this rank, the bumps it receives per call.

Signals never reset between calls: a slot holds a running count, and a wait for ``count`` bumps in
call ``epoch`` (1, 2, ...) polls for ``(epoch - 1) * slot_bumps[slot] + count`` (:func:`target`).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from mkernel.errors import ScheduleError
from mkernel.ir import Op, Role, Schedule, Signal, expand

from . import layout

OPS = tuple(Op)  # op code = index
ROLES = tuple(Role)


class QueueTask(IntEnum):
    """A row of a lowered role queue: op code, chunk, [R0, R1) regions, reads, [W0, W1) waits,
    [S0, S1) signals. (The plan's device rows are :class:`layout.Task`.)"""

    OP = 0
    CHUNK = 1
    R0 = 2
    R1 = 3
    NREADS = 4
    W0 = 5
    W1 = 6
    S0 = 7
    S1 = 8


class QueueRegion(IntEnum):
    """An operand of a lowered task: buffer id, owning rank, [ROW0, ROW1) x [COL0, COL1)."""

    BUFFER = 0
    RANK = 1
    ROW0 = 2
    ROW1 = 3
    COL0 = 4
    COL1 = 5


@dataclass(frozen=True)
class RoleTable:
    """One role's queue on one rank, in order."""

    tasks: np.ndarray  # int64 [n, QueueTask]
    regions: np.ndarray  # int64 [*, QueueRegion]
    waits: np.ndarray  # int64 [*, 2]: layout.Wait's SLOT and COUNT (the plan adds BUMPS)
    signals: np.ndarray  # int64 [*, layout.Signal]: the rank whose slot it bumps, the slot there
    task_ids: np.ndarray  # int64 [n]: the schedule task of each row (masks, gather lists, error messages)


@dataclass(frozen=True)
class Lowered:
    """Everything one rank's kernel needs, as integer arrays."""

    rank: int
    sms: dict[Role, int]
    roles: dict[Role, RoleTable]
    buffers: tuple[str, ...]  # buffer id -> name
    slot_bumps: np.ndarray  # int64 [slots of this rank]
    slot_names: tuple[Signal, ...]  # slot -> the signal it holds (for error messages)


def target(slot_bumps: np.ndarray, slot: int, count: int, epoch: int) -> int:
    """The running value a wait for ``count`` bumps of ``slot`` polls for in call ``epoch``."""
    return (epoch - 1) * int(slot_bumps[slot]) + count


def slots(schedule: Schedule) -> dict[Signal, int]:
    """A dense slot index per signal, numbered per rank in order of first appearance."""
    out: dict[Signal, int] = {}
    per_rank: dict[int, int] = {}
    for task in schedule.tasks:
        for sig in task.signals + tuple(w.signal for w in task.waits):
            if sig not in out:
                out[sig] = per_rank.get(sig.rank, 0)
                per_rank[sig.rank] = out[sig] + 1
    return out


def lower(schedule: Schedule) -> list[Lowered]:
    """Per-rank tables of a single-launch (fused) schedule; ranks in order. A grouped schedule is
    lowered as its expansion: the device walks one row per member, as it did before groups."""
    schedule = expand(schedule)
    if len(schedule.launches) != 1:
        raise ScheduleError(f"{schedule.kernel}/{schedule.variant} has {len(schedule.launches)} launches; the hw "
                            f"backend lowers fused (single-launch) schedules, baselines run as NCCL + torch")
    slot_of = slots(schedule)
    buffers = tuple(b.name for b in schedule.buffers)
    buffer_id = {name: i for i, name in enumerate(buffers)}
    n_slots = [0] * schedule.world
    for sig, slot in slot_of.items():
        n_slots[sig.rank] = max(n_slots[sig.rank], slot + 1)
    bumps = [np.zeros(n, dtype=np.int64) for n in n_slots]
    for task in schedule.tasks:
        for sig in task.signals:
            bumps[sig.rank][slot_of[sig]] += 1
    queues = schedule.queues()
    launch = schedule.launches[0]
    out = []
    for rank in range(schedule.world):
        roles = {}
        for role in ROLES:
            queue = queues.get((rank, 0, role), [])
            if queue:
                roles[role] = _table(queue, buffer_id, slot_of)
        names = [None] * n_slots[rank]
        for sig, slot in slot_of.items():
            if sig.rank == rank:
                names[slot] = sig
        out.append(Lowered(rank, {r: launch.budget(r) for r in ROLES}, roles, buffers, bumps[rank], tuple(names)))
    return out


def _table(queue, buffer_id: dict[str, int], slot_of: dict[Signal, int]) -> RoleTable:
    tasks, regions, waits, signals = [], [], [], []  # rows in QueueTask, QueueRegion, layout.Wait, layout.Signal order
    for t in queue:
        r0 = len(regions)
        regions += [(buffer_id[r.buffer], r.rank, r.row0, r.row1, r.col0, r.col1) for r in t.reads + t.writes]
        w0 = len(waits)
        waits += [(slot_of[w.signal], w.count) for w in t.waits]
        s0 = len(signals)
        signals += [(s.rank, slot_of[s]) for s in t.signals]
        tasks.append((OPS.index(t.op), t.chunk, r0, len(regions), len(t.reads), w0, len(waits), s0, len(signals)))

    def arr(rows, width):
        return np.asarray(rows, dtype=np.int64).reshape(-1, width)

    return RoleTable(arr(tasks, len(QueueTask)), arr(regions, len(QueueRegion)), arr(waits, layout.Wait.COUNT + 1),
                     arr(signals, len(layout.Signal)),
                     np.asarray([t.id for t in queue], dtype=np.int64))
