"""Simulate one node instead of N when every node does the same thing.

Many schedules are node-symmetric: rank (n, l) runs the same queues as rank (0, l) once every rank
in them is renamed by the shift (node m -> node m - n, mod N), up to where in a buffer a region
sits (its size is what costs time). Then every node follows the same timeline, and what rank
(m, l) sends to (0, l) lands when what (0, l) sends to (m, l) lands. So only node 0 is simulated,
and each put to another node is delivered back to its sender as the mirror image of the put it
receives, over the sender's own NIC ingress.

A collapsed run gives exact times (tests check them against the full run on small clusters) but
no data and no hazard tracking: the mirrored writes land in other regions than the real ones.
``is_node_symmetric`` checks the condition on the schedule itself; nothing is assumed.
"""
from __future__ import annotations

import dataclasses

from mkernel.ir import Op, Region, Schedule, Signal, Task, Wait


def _shift(rank: int, nodes: int, gpus: int, by: int) -> int:
    node, local = divmod(rank, gpus)
    return ((node - by) % nodes) * gpus + local


def _canon(task: Task, nodes: int, gpus: int, by: int) -> tuple:
    """A task with ranks shifted by ``by`` nodes and region offsets dropped."""
    def reg(r: Region) -> tuple:
        return (r.buffer, _shift(r.rank, nodes, gpus, by), r.shape)

    def sig(s: Signal) -> tuple:
        return (_shift(s.rank, nodes, gpus, by), s.name, s.index)

    return (task.op, task.role, task.launch, task.accumulate, task.chunk, tuple(map(reg, task.reads)),
            tuple(map(reg, task.writes)), tuple((sig(w.signal), w.count) for w in task.waits),
            tuple(map(sig, task.signals)))


def is_node_symmetric(s: Schedule) -> bool:
    """True when every node's queues equal node 0's under the node shift (see module docstring)."""
    gpus = s.gpus_per_node
    nodes = s.world // gpus
    if nodes < 2:
        return False
    per_rank: dict[int, list[tuple]] = {r: [] for r in range(s.world)}
    for t in s.tasks:
        per_rank[t.rank].append(_canon(t, nodes, gpus, t.rank // gpus))
    return all(per_rank[r] == per_rank[r % gpus] for r in range(gpus, s.world))


def collapse(s: Schedule) -> Schedule:
    """Node 0's tasks, with every rank folded onto node 0 (a put then targets its own sender)."""
    gpus = s.gpus_per_node

    def fold_region(r: Region) -> Region:
        return dataclasses.replace(r, rank=r.rank % gpus)

    def fold_signal(sig: Signal) -> Signal:
        return dataclasses.replace(sig, rank=sig.rank % gpus)

    tasks = []
    for t in s.tasks:
        if t.rank >= gpus:
            continue
        # A put keeps its real destination: it names the connection (batches, fences); the network
        # folds it onto the simulated ranks only to pick links and the receiving proxy.
        writes = t.writes if t.op is Op.PUT else tuple(map(fold_region, t.writes))
        tasks.append(dataclasses.replace(
            t, id=len(tasks), reads=tuple(map(fold_region, t.reads)), writes=writes,
            waits=tuple(Wait(fold_signal(w.signal), w.count) for w in t.waits),
            signals=tuple(map(fold_signal, t.signals))))
    return dataclasses.replace(s, world=gpus, tasks=tuple(tasks))
