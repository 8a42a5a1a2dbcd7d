"""Simulate one rank per node instead of G when every GPU of a node does the same work rotated.

Many schedules are symmetric under local-rank rotation: rank (n, l) runs the queues of rank (n, 0)
once every rank they name is rotated by l inside its node (local m -> m + l mod G) and every
signal is renamed. The renaming is not guessed: it is read off the schedule. Each rank numbers the
signals it waits on in the order its queues (walked in one key order, member by member) first wait
on them; ``c_q``, the map from rank q's waited signals to its node's base rank b's, sends each to
the base's signal of the same number. The schedule is foldable when every rank's queues equal the
base's member for member in canonical form: op, role, launch, shapes and costs alike (``_shape``),
the numbers of the signals waited on equal (so ``c_q`` is one-to-one and waits at equal positions
wait on signals it pairs), region ranks equal relative to the task's rank, and each bump equal as
(its rank relative to the task's, the number its signal has on the rank it lives on). Then, by
induction over the run's events, rank q's tasks start and end when the base's do, and its signal s
holds what the base's ``c_q(s)`` holds.

So only the base ranks are simulated. A bump of signal s on another local rank p becomes a bump
of ``c_p(s)`` on the base (:class:`~mkernel.sim.engine.Model` folds the rank when it bumps, so
the signal keeps its real rank until then and a flag to a peer still pays the NVLink latency).
Every per-rank resource folds onto the base's (``Model.home``): by the same symmetry, the flows
on peer l's NVLink egress are the rotated images of the flows on the base's, so each flow's legs
on the G ports of one kind are summed onto the base's one port: the max-min rates of this
quotient network are those of the full one (each link carries what its orbit's each link does).

The check costs one pass over the members, cheapest test first, and stops at the first
difference: queue keys and lengths (no member is read), then each member's work, the ranks its
regions name and its waits, then its bumps; a refused run pays only up to where its ranks differ
(docs/results/2026-12-03-sim-fold.md).

Refused (the run stays as it was, and says why): a controller, a trace or stress (their SMs are
named), several NICs per GPU (messages are striped by a count over all ranks), SRD jitter drawn
in message order over all ranks, and any schedule the check finds not rotation-symmetric.
"""
from __future__ import annotations

import dataclasses
import itertools

from mkernel.ir import Op, Schedule, Signal, Task

UNWAITED = -1  # the number of a signal nobody waits on: its bumps change nothing, wherever they go


class NotFoldable(Exception):
    """Why a schedule is not symmetric under local-rank rotation (the message says where)."""


def refusal(s: Schedule, c, *, controller=None, trace: bool = False, stress: float = 0.0) -> str | None:
    """Why a run of ``s`` on ``c`` may not fold local ranks whatever its schedule, or None."""
    if s.gpus_per_node < 2:
        return "one GPU per node"
    if controller is not None or trace or stress > 0:
        return "a controller, a trace or stress names every SM"
    return cluster_refusal(c) if any(t.op is Op.PUT for t in s.tasks) else None


def cluster_refusal(c) -> str | None:
    """Why a run with network messages on ``c`` may not fold local ranks, or None."""
    if c.nic.count > 1:
        return f"{c.nic.count} NICs per GPU: messages are striped over them by a count over all ranks"
    if c.transport == "efa_srd" and c.nic.srd_jitter_us > 0:
        return "SRD jitter is drawn in message order over all ranks"
    return None


def _line(first: int, step: int, n: int):
    """``first``, ``first + step``, ... (n of them)."""
    return range(first, first + n * step, step) if step else itertools.repeat(first, n)


def _at(queue: list[Task], m: int) -> tuple[Task, int]:
    """The entry of ``queue`` that holds its member ``m``, and which member of it that is."""
    for t in queue:
        if m < t.count:
            return t, m
        m -= t.count
    raise IndexError(m)


class _Fold:
    """The check's tables, and the folded schedule built from them. Each pass makes one canonical
    tuple per member of a queue; a non-base rank's are compared with its base's as soon as they
    are made, and dropped."""

    def __init__(self, s: Schedule) -> None:
        self.s, self.g = s, s.gpus_per_node
        queues: dict[int, dict[tuple, list[Task]]] = {r: {} for r in range(s.world)}
        for t in s.tasks:
            queues[t.rank].setdefault((t.launch, t.role), []).append(t)
        self.queues = queues
        self.order = {r: sorted(q) for r, q in queues.items()}  # one walk order for every rank
        self.number: dict[tuple, int] = {}  # waited (rank, name, index) -> its number on that rank
        self.named: dict[int, dict[int, tuple]] = {}  # base rank -> number -> its waited (name, index)
        self.shapes: dict[tuple, tuple] = {}  # interned: equal shapes compare by identity
        self.bumps: dict[int, list[tuple]] = {}  # base task id -> each member's canonical bumps
        self.moves: dict[tuple, tuple] = {}  # by _moving
        self.numbered = dict.fromkeys(range(s.world), 0)  # how many signals each rank has numbered

    def others(self):
        """(rank, its base) of every non-base rank."""
        for q in range(self.s.world):
            if q % self.g:
                yield q, q - q % self.g

    def lengths(self) -> None:
        """Queue keys and member counts, from the entries' counts alone."""
        size = {r: [sum(t.count for t in q[k]) for k in self.order[r]] for r, q in self.queues.items()}
        for q, b in self.others():
            if self.order[q] != self.order[b]:
                raise NotFoldable(f"rank {q} has other queues than rank {b}")
            for k, mine, theirs in zip(self.order[q], size[q], size[b]):
                if mine != theirs:
                    raise NotFoldable(f"queue (launch {k[0]}, {k[1].value}) of rank {q} has {mine} members, "
                                      f"rank {b}'s {theirs}")

    def _shape(self, t: Task, steps: list[int] | None, i: int) -> tuple:
        """Member ``i``'s work: what costs time (region offsets are left out: a region's size is
        what costs; see :func:`mkernel.sim.collapse._canon`), and each region's rank relative to
        the task's as (node step, local step), ``steps`` giving the regions' rank steps (None:
        none steps, and every member's is member 0's). Interned: equal ones compare by identity."""
        g, rank = self.g, t.rank
        node = rank // g
        if steps is None:
            regions = tuple([(r.buffer, r.row1 - r.row0, r.col1 - r.col0, r.rank // g - node, (r.rank - rank) % g)
                             for r in t.reads + t.writes])
        else:
            regions = tuple([(r.buffer, r.row1 - r.row0, r.col1 - r.col0, (r.rank + i * dk) // g - node,
                              (r.rank + i * dk - rank) % g) for r, dk in zip(t.reads + t.writes, steps)])
        shape = (t.op, t.role, t.launch, t.accumulate, bool(t.mask), len(t.index), regions,
                 tuple([w.count for w in t.waits]), len(t.signals))
        return self.shapes.setdefault(shape, shape)

    def _moving(self, st) -> tuple:
        """A step's region rank steps and signal steps, each None where none moves (many
        entries share a step's values: asked once per distinct one)."""
        key = (st.regions, st.signals)
        out = self.moves.get(key)
        if out is None:
            out = self.moves[key] = ([dk for dk, _, _ in st.regions] if any(dk for dk, _, _ in st.regions) else None,
                                     st.signals if any(dk or dx for dk, dx in st.signals) else None)
        return out

    def _waits(self, rank: int, queue: list[Task]) -> list[tuple]:
        """(work, numbers of the waited signals) of each member, numbering new signals as met."""
        number, rows = self.number, []
        count = self.numbered[rank]
        for t in queue:
            n = t.count
            steps = self._moving(t.step)[0] if n > 1 else None
            shape = self._shape(t, None, 0) if steps is None else None
            shapes = None if steps is None else [self._shape(t, steps, i) for i in range(n)]
            if not t.waits:
                rows += [(shape, ())] * n if shapes is None else [(x, ()) for x in shapes]
                continue
            if any(w.signal.rank != rank for w in t.waits):
                raise NotFoldable(f"{t.describe()} waits on another rank")
            dxs = t.step.waits if n > 1 and t.step.waits else (0,) * len(t.waits)
            if not any(dxs):  # every member waits on member 0's signals: number them once, in order
                member = []
                for w, _ in zip(t.waits, dxs):  # (as the general loop below pairs them)
                    g0 = w.signal
                    k = number.setdefault((rank, g0.name, g0.index), count)
                    if k == count:
                        count += 1
                    member.append(k)
                member = tuple(member)
                rows += [(shape, member)] * n if shapes is None else [(x, member) for x in shapes]
                continue
            lines = [_line(w.signal.index, dx, n) for w, dx in zip(t.waits, dxs)]
            names = [w.signal.name for w in t.waits]
            for i, indices in enumerate(zip(*lines)):
                member = []
                for name, index in zip(names, indices):
                    k = number.setdefault((rank, name, index), count)
                    if k == count:
                        count += 1
                    member.append(k)
                rows.append((shape or shapes[i], tuple(member)))
        self.numbered[rank] = count
        return rows

    def _bumps(self, rank: int, queue: list[Task], keep: bool) -> list[tuple]:
        """Each member's bumps, each as (node step, local step, its signal's number on the rank
        it lives on) or UNWAITED; with ``keep``, each entry's are kept for :meth:`folded`.
        Members whose bumps do not step share one row: most entries' are fixed."""
        g, get, rows = self.g, self.number.get, []
        node = rank // g
        for t in queue:
            n, first = t.count, len(rows)
            if not t.signals:
                rows += [()] * n
                continue
            moving = self._moving(t.step)[1] if n > 1 else None
            if moving is None:
                rows += [tuple(UNWAITED if (k := get((x.rank, x.name, x.index), UNWAITED)) == UNWAITED else
                               (x.rank // g - node, (x.rank - rank) % g, k) for x in t.signals)] * n
            elif len(t.signals) == 1:  # a wave's tiles, each bumping its peer's flag
                x, (dk, dx) = t.signals[0], moving[0]
                name = x.name
                rows += [(UNWAITED if (k := get((p, name, i), UNWAITED)) == UNWAITED else
                          (p // g - node, (p - rank) % g, k),)
                         for p, i in zip(_line(x.rank, dk, n), _line(x.index, dx, n))]
            else:
                for i in range(n):
                    member = []
                    for x, (dk, dx) in zip(t.signals, moving):
                        p = x.rank + i * dk
                        k = get((p, x.name, x.index + i * dx), UNWAITED)
                        member.append(UNWAITED if k == UNWAITED else (p // g - node, (p - rank) % g, k))
                    rows.append(tuple(member))
            if keep:
                self.bumps[id(t)] = rows[first:]
        return rows

    def _compare(self, q: int, b: int, key: tuple, mine: list, theirs: list, what) -> None:
        """Raise where rank ``q``'s rows for queue ``key`` first differ from its base's, ``what``
        (of the two rows) saying how."""
        if mine != theirs:
            m = next(i for i, (x, y) in enumerate(zip(mine, theirs)) if x != y)
            (u, i), (t, j) = _at(self.queues[q][key], m), _at(self.queues[b][key], m)
            raise NotFoldable(f"member {i} of {u.describe()} {what(mine[m], theirs[m])} member {j} of "
                              f"{t.describe()} of rank {b}")

    def check(self) -> None:
        self.lengths()
        base = {b: {k: self._waits(b, self.queues[b][k]) for k in self.order[b]} for b in range(0, self.s.world, self.g)}
        for q, b in self.others():
            for k in self.order[q]:
                self._compare(q, b, k, self._waits(q, self.queues[q][k]), base[b][k],
                              lambda x, y: "does other work or reaches other ranks than" if x[0] is not y[0]
                              else "waits on other signals than")
        base = {b: {k: self._bumps(b, self.queues[b][k], True) for k in self.order[b]}
                for b in range(0, self.s.world, self.g)}
        for q, b in self.others():
            for k in self.order[q]:
                self._compare(q, b, k, self._bumps(q, self.queues[q][k], False), base[b][k],
                              lambda x, y: "bumps other signals than")
        named = {}
        for (rank, name, index), n in self.number.items():
            if rank % self.g == 0:
                named.setdefault(rank, {})[n] = (name, index)
        self.named = named

    def folded(self) -> Schedule:
        """The base ranks' tasks, their bumps renamed to the base signals (real ranks kept)."""
        tasks: list[Task] = []
        for t in self.s.tasks:
            if t.rank % self.g:
                continue
            for p in self._renamed(t):
                tasks.append(Task(len(tasks), p.rank, p.role, p.op, p.reads, p.writes, p.accumulate, p.waits,
                                  p.signals, p.launch, p.chunk, p.label, p.mask, p.index, p.count, p.step))
        return dataclasses.replace(self.s, tasks=tuple(tasks))

    def _renamed(self, t: Task) -> list[Task]:
        """``t`` with its bumps renamed (those of signals nobody waits on dropped): one group where
        the renamed indices still step evenly, else its members one by one."""
        if not t.signals:
            return [t]
        g, node = self.g, t.rank // self.g
        images = [[None if n == UNWAITED else self.named[(node + n[0]) * g][n[2]] for n in member]
                  for member in self.bumps[id(t)]]
        keep = [k for k, image in enumerate(images[0]) if image is not None]
        if t.count == 1:
            return [dataclasses.replace(t, signals=tuple(Signal(t.signals[k].rank, *images[0][k]) for k in keep))]
        moved = {k: images[1][k][1] - images[0][k][1] for k in keep if images[1][k] is not None}
        if len(moved) == len(keep) and all(
                (image[k] is None) == (k not in moved) and (k not in moved or image[k] == (
                    images[0][k][0], images[0][k][1] + i * moved[k]))
                for i, image in enumerate(images) for k in range(len(t.signals))):
            steps = t.step.signals or ((0, 0),) * len(t.signals)
            signals = tuple(Signal(t.signals[k].rank, *images[0][k]) for k in keep)
            return [dataclasses.replace(t, signals=signals, step=dataclasses.replace(
                t.step, signals=tuple((steps[k][0], moved[k]) for k in keep)))]
        return [dataclasses.replace(m, signals=tuple(Signal(sig.rank, *image) for sig, image in zip(m.signals, images[i])
                                                     if image is not None))
                for i, m in enumerate(t.members())]


def fold_locals(s: Schedule) -> Schedule:
    """``s`` with one simulated rank per node (see the module docstring); raises
    :class:`NotFoldable` saying why not. Put groups are expanded first (their ranks may step
    across nodes), and groups whose signals cycle or whose members wrap (the check reads steps as even)."""
    from .collapse import _flat_puts

    f = _Fold(_flat_puts(s, cycling=True))
    f.check()
    return f.folded()
