"""The race rule of ``validate()``: every two conflicting memory accesses are ordered.

Why: a missing wait rarely shows in a simulation, because the model's timing happens to run the
writer first; on GPUs that drift it corrupts data. A static check catches it on any timing.

Happens-before edges:
- a wait for every bump of a signal comes after every task that bumps it. A wait for fewer bumps
  orders nothing: any ``c`` of the bumpers may be the ones that satisfied it, in any timing;
- on each rank, every task of launch ``L`` comes before every task of launch ``L + 1`` (stream order).
Queue order is not an edge: a role's SMs run the tasks of its queue concurrently.

Conflicts: a write and a read, or two writes, of overlapping regions of one buffer on one rank, by
different tasks. Two accumulating writes commute and do not conflict. And a write into a rank's
output by another rank must be waited for by some task of that rank, or the kernel may end first.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from .errors import ScheduleError
from .ir import Schedule, Task
from .members import ragged
from .signal_table import bump_keys

RACE_CHECK_MAX_TASKS = 60_000  # larger schedules skip this rule (pairwise search); tests use small shapes


def happens_before_graph(s: Schedule, every_signaler: bool = False) -> list[list[int]]:
    """Predecessors of every task, plus one barrier node per (rank, launch > 0) after the tasks.

    With ``every_signaler`` a wait depends on every bumper of its signal, whatever its count: the
    conservative graph in which validate looks for dependency cycles. There a group (``Task.count``
    > 1) is one node, which depends on every bumper of every member's waits: its members' graph
    with each group's members merged, so a cycle among members is one among groups (the converse
    need not hold). Without it, the schedule must be flat (a wait's count is a member's).
    """
    n = len(s.tasks)
    if not every_signaler and any(t.count > 1 for t in s.tasks):
        raise ValueError("the happens-before graph of a wait's count is one of members: expand the schedule first")
    signalers: dict = defaultdict(list)  # (rank, name, index) -> bumpers: tuples hash and compare in C
    for task in s.tasks:
        if task.count > 1:
            fixed, moving = bump_keys(task)
            for k in [k for k, _ in fixed] + moving:
                signalers[k].append(task.id)
            continue
        for sig in task.signals:
            signalers[(sig.rank, sig.name, sig.index)].append(task.id)
    barrier: dict = {}
    for task in s.tasks:
        if task.launch > 0 and (task.rank, task.launch) not in barrier:
            barrier[(task.rank, task.launch)] = n + len(barrier)
    preds: list[list[int]] = [[] for _ in range(n + len(barrier))]
    for task in s.tasks:
        if task.count > 1 and task.step.waits:
            preds[task.id] = _group_waits(task, signalers)
        else:
            for wait in task.waits:
                g = wait.signal
                bumpers = signalers[(g.rank, g.name, g.index)]
                if every_signaler or wait.count == len(bumpers):
                    preds[task.id].extend(bumpers)
        if task.launch > 0:
            preds[task.id].append(barrier[(task.rank, task.launch)])
        after = barrier.get((task.rank, task.launch + 1))
        if after is not None:
            preds[after].append(task.id)
    return preds


def _group_waits(task: Task, signalers: dict) -> list[int]:
    """The bumpers of every member's waits of a group whose waits step (each once)."""
    get, out = signalers.get, set()
    for wait, dx in zip(task.waits, task.step.waits):
        g = wait.signal
        for i in range(task.count) if dx else (0,):
            out.update(get((g.rank, g.name, g.index + i * dx), ()))
    return list(out)


def topological_order(preds: list[list[int]]) -> list[int]:
    """Nodes in an order that respects every edge (Kahn); nodes on or behind a cycle are left out."""
    succs: list[list[int]] = [[] for _ in preds]
    indegree = [len(p) for p in preds]
    for node, ps in enumerate(preds):
        for p in ps:
            succs[p].append(node)
    ready = [t for t, d in enumerate(indegree) if d == 0]
    order = []
    while ready:
        t = ready.pop()
        order.append(t)
        for nxt in succs[t]:
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                ready.append(nxt)
    return order


def acyclic(src: np.ndarray, dst: np.ndarray, nodes: int) -> bool:
    """Whether the graph of ``nodes`` nodes and edges ``src[i] -> dst[i]`` has no cycle: Kahn's
    algorithm a frontier at a time on arrays (every node of no unprocessed predecessor at once), so
    its Python steps are the graph's depth, not its nodes (a few dozen on a builder's schedule).
    The first step is taken before the edges are sorted: the edges out of nodes of no predecessor
    are dropped (their targets' in-degrees counted without them), so those nodes make the first
    frontier with nothing to free (validate's cycle check leaves such bumps out of the graph it
    hands here; edges out of the nodes they leave without a predecessor remain)."""
    keep = np.bincount(dst, minlength=nodes)[src] > 0
    src, dst = np.compress(keep, src), np.compress(keep, dst)
    order = np.argsort(src, kind="stable")
    targets = dst[order]
    start = np.zeros(nodes + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=nodes), out=start[1:])
    indegree = np.bincount(dst, minlength=nodes)
    last = np.zeros(nodes, np.int64)  # (per node freed in a step: the last of its edges that step, to keep it once)
    front, done = np.flatnonzero(indegree == 0), 0
    while len(front):
        done += len(front)
        size = start[front + 1] - start[front]  # the front's edges: each node's range of targets
        hit = targets[np.repeat(start[front], size) + ragged(size)[1]]
        np.subtract.at(indegree, hit, 1)  # (not a sort of the edges, as np.unique(return_counts) was)
        freed = np.flatnonzero(indegree[hit] == 0)
        last[hit[freed]] = freed
        front = hit[freed[last[hit[freed]] == freed]]
    return done == nodes


def _ordered(a: int, b: int, preds: list[list[int]], pos: list[int]) -> bool:
    """Whether a chain of edges leads from task ``a`` to task ``b`` (needs pos[a] < pos[b])."""
    stack, seen = [b], {b}
    while stack:
        for p in preds[stack.pop()]:
            if p == a:
                return True
            if p not in seen and pos[p] > pos[a]:
                seen.add(p)
                stack.append(p)
    return False


def _check_outputs_land(s: Schedule, preds: list[list[int]]) -> None:
    """A write into rank r's output by another rank must come before some task of rank r: else r's
    kernel can finish, and its caller read the output, before the write lands."""
    from .ir import BufferKind

    outputs = {b.name for b in s.buffers if b.kind is BufferKind.OUTPUT}
    succs: list[list[int]] = [[] for _ in preds]
    for node, ps in enumerate(preds):
        for p in ps:
            succs[p].append(node)
    n = len(s.tasks)
    for task in s.tasks:
        for r in task.writes:
            if r.buffer not in outputs or r.rank == task.rank:
                continue
            stack, seen, found = [task.id], {task.id}, False
            while stack and not found:
                for nxt in succs[stack.pop()]:
                    if nxt < n and s.tasks[nxt].rank == r.rank:
                        found = True
                        break
                    if nxt not in seen:
                        seen.add(nxt)
                        stack.append(nxt)
            if not found:
                raise ScheduleError(f"race: {task.describe()} writes {r}, and no task of rank {r.rank} waits for "
                                    f"it, so that rank's kernel may end before the write lands")


def _conflicts(s: Schedule):
    """Yield (task_a, task_b, region_a, region_b, kind) for every conflicting access pair."""
    groups: dict = defaultdict(list)
    for task in s.tasks:
        for r in task.reads:
            groups[(r.buffer, r.rank)].append((r.row0, r.row1, r.col0, r.col1, task, r, False))
        for r in task.writes:
            groups[(r.buffer, r.rank)].append((r.row0, r.row1, r.col0, r.col1, task, r, True))
    for accesses in groups.values():
        if not any(a[6] for a in accesses):
            continue
        accesses.sort(key=lambda a: a[0])
        active: list = []
        for acc in accesses:
            row0, _, col0, col1, task, _, write = acc
            active = [a for a in active if a[1] > row0]
            for other in active:
                if other[4] is task or not (write or other[6]):
                    continue
                if other[2] >= col1 or col0 >= other[3]:
                    continue
                if write and other[6] and task.accumulate and other[4].accumulate:
                    continue
                yield other[4], task, other[5], acc[5], "both write" if write and other[6] else "read and write"
            active.append(acc)


def check_races(s: Schedule) -> None:
    """Raise ScheduleError naming two unordered conflicting tasks, or a remote write into an output
    that its rank's kernel may end before, if any (schedules of at most RACE_CHECK_MAX_TASKS tasks; cycles must
    already have been ruled out)."""
    if len(s.tasks) > RACE_CHECK_MAX_TASKS:
        return
    preds = happens_before_graph(s)
    pos = [0] * len(preds)
    for at, node in enumerate(topological_order(preds)):
        pos[node] = at
    _check_outputs_land(s, preds)
    checked: set = set()
    for a, b, ra, rb, kind in _conflicts(s):
        first, second = (a, b) if pos[a.id] < pos[b.id] else (b, a)
        key = (first.id, second.id)
        if key in checked:
            continue
        checked.add(key)
        if not _ordered(first.id, second.id, preds, pos):
            (a, ra), (b, rb) = sorted([(a, ra), (b, rb)], key=lambda x: x[0].id)
            raise ScheduleError(f"race: {a.describe()} and {b.describe()} {kind} overlapping memory ({ra} / {rb}) "
                                f"with no chain of waits ordering them")
