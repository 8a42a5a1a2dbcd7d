"""Launches of independent GEMM tiles (a baseline's matmul), played without events.

A launch whose one role computes GEMM tiles that wait on nothing and signal nothing (a timing
build's baseline matmul: its collective is timed as the library call) is observed by nobody until
it ends. In a bulk run without data, controller, trace, stress or faults (and, where hazards are
tracked, if nothing could tell when its tiles' writes land: the model lands them at its end) the
dispatcher (:mod:`mkernel.sim.dispatch`) has its SMs take the tiles in queue order: the first wave
each counting itself in (the GEMM speed class it sees, :func:`mkernel.cost.sm_speed`), then, when
a tile ends, the next tile at the speed class of the SMs computing, which stays put until the
queue is empty and SMs start to retire. (A fused kernel's tiles pay a per-tile cost after their
work, and signal: its launches are never played.) The first
wave's classes differ, so the tiles end one by one and never meet again: about 8,400 events for
the 32768^2 2 x 8 baseline. :func:`launch_end` plays the same steps on a heap of SM free times,
with the model's own tile costs and the event loop's float sums (an end is its start plus the
cost), so the launch ends at the same instant, bit for bit.
"""
from __future__ import annotations

from heapq import heapify, heapreplace

from mkernel.ir import Launch, Op, Role


def plain(m, rank: int, li: int, launch: Launch) -> bool:
    """Whether launch ``li`` of ``rank`` may be played by :func:`launch_end` in model ``m`` (with
    hazard tracking, where nothing could tell when its tiles' writes land: the model lands them at
    its end, :meth:`mkernel.sim.hazards.ArrivalTracker.unobserved`)."""
    if (m.data is not None or m._one_by_one or m.inject.f.any or m.c.gpu.fused_tile_us
            or [role for role, _ in launch.sms] != [Role.COMPUTE]):
        return False
    queue = m.queues.get((rank, li, Role.COMPUTE), [])
    return all(t.op is Op.GEMM and not t.waits and not t.signals for t in queue) and m.tracker.unobserved(rank, li, queue)


def tile_ends(m, rank: int, li: int, launch: Launch) -> list[float]:
    """When each tile of launch ``li`` of ``rank`` ends, started now, in the order the SMs take them."""
    now = m.env.now
    queue = m.queues.get((rank, li, Role.COMPUTE), ())
    sms = min(launch.budget(Role.COMPUTE), sum(t.count for t in queue))
    ends: list[float] = []
    busy, entry, member = 0, 0, 0  # the next tile: member ``member`` of queue entry ``entry``
    while len(ends) < sms:  # the first wave, entry by entry, as _bulk takes it (_ready_split's speeds)
        task = queue[entry]
        part = min(sms - len(ends), task.count - member)
        if m.speeds[busy + 1] == m.speeds[busy + part]:
            busy += part
            ends += [now + m._gemm_us(task, m.speeds[busy])] * part
        else:
            for _ in range(part):
                busy += 1
                ends.append(now + m._gemm_us(task, m.speeds[busy]))
        member += part
        if member == task.count:
            entry, member = entry + 1, 0
    free = list(ends)  # when each SM can take its next tile (a heap)
    heapify(free)
    speed = m.speeds[busy]
    for task in queue[entry:]:  # each next tile to the SM free first, at the speed class of all computing
        us = m._gemm_us(task, speed)  # (an entry's tiles cost alike)
        for _ in range(task.count - member):
            end = free[0] + us
            heapreplace(free, end)
            ends.append(end)
        member = 0
    return ends


def launch_end(m, rank: int, li: int, launch: Launch) -> float:
    """When launch ``li`` of ``rank`` ends, started now (its last tile's end: every SM then retires);
    the model's compute-busy time and progress count are brought up to that end.

    :func:`tile_ends` reads nothing but the start, the SM budget, and its queue's tile costs (each
    entry's :meth:`~mkernel.sim.engine.Model._gemm_shape` and count) in order, so launches alike in
    these end alike: played once per kind (the 16 ranks of a 2 x 8 baseline: one kind, 520k heap steps
    each). This holds while a tile's cost is a function of its shape and speed class alone (``Model._gemm_us``;
    the model's speeds, cluster and item size are fixed per run); a per-rank factor in it would have to join the key."""
    now = m.env.now
    queue = m.queues.get((rank, li, Role.COMPUTE), ())
    key = (now, launch.budget(Role.COMPUTE), tuple((m._gemm_shape(t), t.count) for t in queue))
    played = m.played.get(key)
    if played is None:
        ends = tile_ends(m, rank, li, launch)
        played = m.played[key] = (max(ends, default=now), len(ends))
    last, tiles = played
    m.compute_busy[rank] += last - now
    if m.progress is not None:
        m._ended += tiles
        m._told = m._ended
        m.progress(m.s.variant, m._ended, m._total)
    return last
