"""What a plan's tasks reach on other ranks: where buffers live in the symmetric heap, the arrival
flags of network messages, and the ring commands of each put.

- **placement**: a buffer that some task touches on another rank, or that a network put reads or
  writes, lives in the symmetric heap at the same offset on every rank; every other buffer is
  *bound*: the caller's tensor (inputs), a fresh tensor (outputs) or plan-owned scratch, given to
  the kernel per call through the ``bases`` table;
- **network flags**: the proxy *sets* a put's arrival flag (see :class:`NetFlags`), so a signal
  that several puts bump becomes one flag per put;
- **commands**: each put becomes its ring commands, with heap offsets precomputed. A one-pair put
  is one PUT that sets the arrival flag; a put of several pairs sends data-only PUTs (their flag is
  the sink slot nobody waits on) and then one SIGNAL, which the proxy orders after them, so the
  flag never overtakes data on an unordered transport.

All of it is the same on every rank but the commands, which :mod:`plan` writes into each rank's
aux table.
"""
from __future__ import annotations

from dataclasses import dataclass

from mkernel.errors import ScheduleError
from mkernel.ir import Op, Schedule
from mkernel.ir import Task as IrTask  # the schedule's task (layout.Task names the device row's columns)

from . import ring
from .layout import ALIGN
from .lower import Lowered


@dataclass(frozen=True)
class Placement:
    """Where every buffer lives: heap offsets (same on every rank) or bound per call."""

    heap: dict[str, int]  # buffer -> byte offset in the symmetric heap
    heap_bytes: int
    bound: tuple[str, ...]  # buffers given per call (inputs, outputs, plan-owned scratch)


def placement(s: Schedule) -> Placement:
    """Heap offsets of the shared buffers; the rest are bound."""
    shared = set()
    for t in s.tasks:
        for r in t.reads + t.writes:
            if r.rank != t.rank or t.op is Op.PUT:
                shared.add(r.buffer)
    heap, off = {}, 0
    for b in s.buffers:
        if b.name in shared:
            heap[b.name] = off
            off += -(-b.rows * b.cols * b.itemsize // ALIGN) * ALIGN
    return Placement(heap, off, tuple(b.name for b in s.buffers if b.name not in shared))


@dataclass(frozen=True)
class NetFlags:
    """Arrival flags of network messages. The proxy *sets* a flag to the epoch (RDMA has no portable
    remote add: EFA lacks atomics), so a signal that k puts bump becomes k flags, one per put, and a
    wait for all k bumps becomes k waits."""

    flag_of: dict[int, int]  # put task id -> flag slot on its destination
    split: dict[tuple[int, int], tuple[int, ...]]  # (rank, slot) -> the flags it became
    extra: dict[int, list[int]]  # rank -> flag slots added after the lowered ones


def network_flags(s: Schedule, lowered: list[Lowered]) -> NetFlags:
    """Every put's arrival flag on its destination: its signal's slot where that put alone bumps it,
    else one flag of its own, added after the lowered slots. Raises ScheduleError for a put that
    bumps other than one signal, or whose signal other tasks bump too."""
    by_slot: dict[tuple[int, int], list[IrTask]] = {}
    slot_of = {sig: slot for low in lowered for slot, sig in enumerate(low.slot_names)}  # a signal names its rank
    for t in s.tasks:
        if t.op is Op.PUT:
            if len(t.signals) != 1:
                raise refuse(s, t, f"it bumps {len(t.signals)} signals; a network message sets one arrival flag")
            sig = t.signals[0]
            by_slot.setdefault((sig.rank, slot_of[sig]), []).append(t)
    flag_of, split, extra = {}, {}, {}
    for (rank, slot), puts in by_slot.items():
        if lowered[rank].slot_bumps[slot] != len(puts):
            raise refuse(s, puts[0], f"its arrival flag {puts[0].signals[0]} is also bumped by peer or local tasks; "
                                     f"a network flag belongs to network messages only")
        if len(puts) == 1:
            flag_of[puts[0].id] = slot
            continue
        added = extra.setdefault(rank, [])
        first = len(lowered[rank].slot_bumps) + len(added)
        subs = tuple(range(first, first + len(puts)))
        added.extend(subs)
        split[(rank, slot)] = subs
        flag_of.update({t.id: f for t, f in zip(puts, subs)})
    return NetFlags(flag_of, split, extra)


def refuse(s: Schedule, task: IrTask, why: str) -> ScheduleError:
    """The error for a schedule the hw backend cannot run, naming the task and the rule it breaks."""
    return ScheduleError(f"{s.kernel}/{s.variant}: {task.describe()}: {why}; the hw backend cannot run it")


def commands(task: IrTask, buffers: dict, place: Placement, slot: int, sink: int) -> list[tuple]:
    """Ring commands of one put: data-only PUTs, then the flag (PUT of the last pair, or SIGNAL)."""
    dst = task.writes[0].rank
    out = []
    pairs = list(zip(task.reads, task.writes))
    for src, dstr in pairs:
        b = buffers[src.buffer]
        row_bytes = b.cols * b.itemsize
        flag = slot if len(pairs) == 1 else sink
        out.append((ring.PUT, dst, flag, src.size * b.itemsize, place.heap[src.buffer] + src.row0 * row_bytes,
                    place.heap[dstr.buffer] + dstr.row0 * buffers[dstr.buffer].cols * b.itemsize, 0, 0))
    if len(pairs) > 1:
        out.append((ring.SIGNAL, dst, slot, 0, 0, 0, 0, 0))
    return out
