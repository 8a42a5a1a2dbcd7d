"""Simulate one node instead of N when every node does the same thing.

Many schedules are node-symmetric: rank (n, l) runs the same queues as rank (0, l) once every rank
in them is renamed by the shift (node m -> node m - n, mod N), up to where in a buffer a region
sits (its size is what costs time; ``_canon`` says what else is ignored). Then every node follows
the same timeline, and what rank (m, l) sends to (0, l) lands when what (0, l) sends to (m, l)
lands. So only node 0 is simulated, and each put to another node is delivered back to its sender
as the mirror image of the put it receives, over the sender's own NIC ingress.

A collapsed run gives exact times (tests check them against the full run on small clusters) but
no data and no hazard tracking: the mirrored writes land in other regions than the real ones.
``is_node_symmetric`` checks the condition on the schedule itself; nothing is assumed.
"""
from __future__ import annotations

import dataclasses

from mkernel.ir import Op, Region, Schedule, Signal, Task, Wait


def _canon(task: Task, shift) -> tuple:
    """A task with ranks renamed by ``shift`` (a list: rank -> rank), what costs time kept and where
    it sits dropped: region offsets, a causal mask's positions (an attention tile costs by whether it
    is masked, ``cost.attn_us``), a gather's row ids (it costs by how many), the labels."""
    st = task.step
    return (task.op, task.role, task.launch, task.accumulate, task.chunk, bool(task.mask), len(task.index),
            tuple((r.buffer, shift[r.rank], r.row1 - r.row0, r.col1 - r.col0) for r in task.reads),
            tuple((r.buffer, shift[r.rank], r.row1 - r.row0, r.col1 - r.col0) for r in task.writes),
            tuple((shift[w.signal.rank], w.signal.name, w.signal.index, w.count) for w in task.waits),
            tuple((shift[g.rank], g.name, g.index) for g in task.signals), task.count,
            st and (st.regions, st.signals, st.waits, st.chunk, st.period, st.outer, st.rotate))


def _flat_puts(s: Schedule, cycling: bool = False) -> Schedule:
    """``s`` with its groups of puts expanded: a put group's ranks may step across nodes, where the
    node shift and the fold do not keep them evenly spaced (every other group stays in its node);
    with ``cycling``, groups whose signals cycle or whose members wrap too (``Step.period``,
    ``Step.rotate``: a check that reads steps as even, :mod:`mkernel.sim.localfold`'s, takes them
    member by member)."""
    def flat(t: Task) -> bool:
        return t.count > 1 and (t.op is Op.PUT or (cycling and (t.step.period > 0 or t.step.rotate > 0)))

    if not any(flat(t) for t in s.tasks):
        return s
    tasks = []
    for t in s.tasks:
        tasks += t.members() if flat(t) else [t]
    return dataclasses.replace(s, tasks=tuple(Task(i, t.rank, t.role, t.op, t.reads, t.writes, t.accumulate,
                                                   t.waits, t.signals, t.launch, t.chunk, t.label, t.mask, t.index,
                                                   t.count, t.step) for i, t in enumerate(tasks)))


def is_node_symmetric(s: Schedule) -> bool:
    """True when every node's queues equal node 0's under the node shift (see module docstring)."""
    gpus = s.gpus_per_node
    nodes = s.world // gpus
    if nodes < 2:
        return False
    s = _flat_puts(s)
    # shifts[n][rank]: rank renamed as seen from node n (node m -> node m - n, mod nodes)
    shifts = [[((r // gpus - n) % nodes) * gpus + r % gpus for r in range(s.world)] for n in range(nodes)]
    per_rank: dict[int, list[tuple]] = {r: [] for r in range(s.world)}
    for t in s.tasks:
        per_rank[t.rank].append(_canon(t, shifts[t.rank // gpus]))
    return all(per_rank[r] == per_rank[r % gpus] for r in range(gpus, s.world))


def collapse(s: Schedule, span: int = 1) -> Schedule:
    """The tasks of the first ``span`` nodes, every rank folded onto them (rank mod span x GPUs).

    ``span`` > 1 serves fabrics that are symmetric only under a shift by a whole leaf group
    (``Cluster.fold_nodes``): the run simulates one group, and a put to another group lands, as
    its mirror image, on the same place of the simulated group. Built with the constructors, not
    ``dataclasses.replace``: collapse exists for the largest schedules, where replace's per-call
    cost dominated the run."""
    gpus = s.gpus_per_node * span

    def fold(r: Region) -> Region:
        return Region(r.buffer, r.rank % gpus, r.row0, r.row1, r.col0, r.col1)

    s = _flat_puts(s)
    if s.first_nodes == span:  # built for these nodes alone: by validate's locality rules only a put's
        # signals reach past them (to the node it writes), so every other task is kept as it is
        tasks = tuple(Task(t.id, t.rank, t.role, t.op, t.reads, t.writes, t.accumulate, t.waits,
                           tuple(Signal(g.rank % gpus, g.name, g.index) for g in t.signals), t.launch, t.chunk,
                           t.label, t.mask, t.index) if t.op is Op.PUT else t for t in s.tasks)
        return dataclasses.replace(s, world=gpus, tasks=tasks, first_nodes=0)
    tasks = []
    for t in s.tasks:
        if t.rank >= gpus:
            continue
        # A put keeps its real destination: it names the connection (batches, fences); the network
        # folds it onto the simulated ranks only to pick links and the receiving proxy.
        writes = t.writes if t.op is Op.PUT else tuple(fold(r) for r in t.writes)
        tasks.append(Task(len(tasks), t.rank, t.role, t.op, tuple(fold(r) for r in t.reads), writes, t.accumulate,
                          tuple(Wait(Signal(w.signal.rank % gpus, w.signal.name, w.signal.index), w.count)
                                for w in t.waits),
                          tuple(Signal(g.rank % gpus, g.name, g.index) for g in t.signals), t.launch, t.chunk,
                          t.label, t.mask, t.index, t.count, t.step))
    return dataclasses.replace(s, world=gpus, gpus_per_node=s.gpus_per_node, tasks=tuple(tasks), first_nodes=0)
