"""Simulate one rank per node instead of G when every GPU of a node does the same work rotated.

Many schedules are symmetric under local-rank rotation: rank (n, l) runs the queues of rank (n, 0)
once every rank they name is rotated by l inside its node (local m -> m + l mod G) and every
signal is renamed. The renaming is not guessed: it is read off the schedule. Rank q's queues are
walked member by member beside its node's base rank b's; the waits at each position give
``c_q``, the map from rank q's waited signals to b's (``_maps``). The schedule is foldable when
these maps are one-to-one and every rank's queues equal the base's in canonical form
(``_canon_entry``): op, role, launch, shapes and costs alike, region ranks equal relative to the
task's rank, wait counts equal, and each bump equal as (its rank relative to the task's, the
signal ``c`` maps it to). Then, by induction over the run's events, rank q's tasks start and end
when the base's do, and its signal s holds what the base's ``c_q(s)`` holds.

So only the base ranks are simulated. A bump of signal s on another local rank p becomes a bump
of ``c_p(s)`` on the base (:class:`~mkernel.sim.engine.Model` folds the rank when it bumps, so
the signal keeps its real rank until then and a flag to a peer still pays the NVLink latency).
Every per-rank resource folds onto the base's (``Model.home``): by the same symmetry, the flows
on peer l's NVLink egress are the rotated images of the flows on the base's, so each flow's legs
on the G ports of one kind are summed onto the base's one port: the max-min rates of this
quotient network are those of the full one (each link carries what its orbit's each link does).

Refused (the run stays as it was, and says why): a controller, a trace or stress (their SMs are
named), several NICs per GPU (messages are striped by a count over all ranks), SRD jitter drawn
in message order over all ranks, and any schedule the check finds not rotation-symmetric.
"""
from __future__ import annotations

import dataclasses

from mkernel.ir import Op, Schedule, Signal, Task

UNWAITED = ()  # the canonical bump of a signal nobody waits on: it changes nothing


class NotFoldable(Exception):
    """Why a schedule is not symmetric under local-rank rotation (the message says where)."""


def refusal(s: Schedule, c, *, controller=None, trace: bool = False, stress: float = 0.0) -> str | None:
    """Why a run of ``s`` on ``c`` may not fold local ranks whatever its schedule, or None."""
    if s.gpus_per_node < 2:
        return "one GPU per node"
    if controller is not None or trace or stress > 0:
        return "a controller, a trace or stress names every SM"
    puts = any(t.op is Op.PUT for t in s.tasks)
    if puts and c.nic.count > 1:
        return f"{c.nic.count} NICs per GPU: messages are striped over them by a count over all ranks"
    if puts and c.transport == "efa_srd" and c.nic.srd_jitter_us > 0:
        return "SRD jitter is drawn in message order over all ranks"
    return None


def _queues(s: Schedule) -> dict[int, dict[tuple, list[Task]]]:
    out: dict[int, dict[tuple, list[Task]]] = {r: {} for r in range(s.world)}
    for t in s.tasks:
        out[t.rank].setdefault((t.launch, t.role), []).append(t)
    return out


def _chunks(base: list[Task], other: list[Task]):
    """(base entry, its first member, other entry, its first member, members) over two queues
    walked member by member, each chunk inside one entry of each."""
    i = j = a = b = 0
    while i < len(base) and j < len(other):
        t, u = base[i], other[j]
        n = min(t.count - a, u.count - b)
        yield t, a, u, b, n
        a, b = a + n, b + n
        if a == t.count:
            i, a = i + 1, 0
        if b == u.count:
            j, b = j + 1, 0
    if i < len(base) or j < len(other):
        raise NotFoldable("queues of different lengths")


def _steps(t: Task):
    st = t.step if t.count > 1 else None
    regions = st.regions if st and st.regions else ((0, 0, 0),) * (len(t.reads) + len(t.writes))
    waits = st.waits if st and st.waits else (0,) * len(t.waits)
    signals = st.signals if st and st.signals else ((0, 0),) * len(t.signals)
    return regions, waits, signals


def _shape(t: Task) -> tuple:
    """What costs time and does not change from member to member (region offsets are left out:
    a region's size is what costs; see :func:`mkernel.sim.collapse._canon`)."""
    return (t.op, t.role, t.launch, t.accumulate, bool(t.mask), len(t.index),
            tuple((r.buffer, r.row1 - r.row0, r.col1 - r.col0) for r in t.reads + t.writes),
            tuple(w.count for w in t.waits), len(t.signals))


class _Fold:
    def __init__(self, s: Schedule) -> None:
        self.s, self.g = s, s.gpus_per_node
        self.maps: dict[tuple, tuple] = {}  # (rank, name, index) waited -> (name, index) on its base
        self.queues = _queues(s)
        self.cache: dict[int, list[tuple]] = {}  # base entries' canons, by id
        self.specs: dict[int, tuple] = {}

    def pairs(self):
        """(rank, its base, queue key) of every non-base rank."""
        for q in range(self.s.world):
            b = q - q % self.g
            if q != b:
                if self.queues[q].keys() != self.queues[b].keys():
                    raise NotFoldable(f"rank {q} has other queues than rank {b}")
                for key in self.queues[b]:
                    yield q, b, key

    def map_waits(self) -> None:
        """``c``: every waited signal to its base's, from the waits at equal positions."""
        back: dict[tuple, tuple] = {}
        for b in range(0, self.s.world, self.g):
            for queue in self.queues[b].values():
                for t in queue:
                    for w, dx in zip(t.waits, _steps(t)[1]):
                        g = w.signal
                        if g.rank != t.rank:
                            raise NotFoldable(f"{t.describe()} waits on another rank")
                        for i in range(t.count if dx else 1):
                            self.maps[(g.rank, g.name, g.index + i * dx)] = (g.name, g.index + i * dx)
        for q, b, key in self.pairs():
            for t, a, u, c, n in _chunks(self.queues[b][key], self.queues[q][key]):
                if len(t.waits) != len(u.waits):
                    raise NotFoldable(f"{u.describe()} has other waits than {t.describe()}")
                for w, dx, v, dy in zip(t.waits, _steps(t)[1], u.waits, _steps(u)[1]):
                    if v.signal.rank != u.rank:
                        raise NotFoldable(f"{u.describe()} waits on another rank")
                    g, h = w.signal, v.signal
                    for i in range(n if dx or dy else 1):
                        key_q, image = (h.rank, h.name, h.index + (c + i) * dy), (g.name, g.index + (a + i) * dx)
                        old = self.maps.setdefault(key_q, image)
                        if old != image or back.setdefault((h.rank, image), key_q) != key_q:
                            raise NotFoldable(f"signal {h.name}[{key_q[2]}]@{h.rank} renames two ways")

    def spec(self, t: Task) -> tuple:
        """What the check reads of ``t``, once per entry: its shape, its regions' rank steps and
        ranks, and its signals as (rank, rank step, name, index, index step)."""
        spec = self.specs.get(id(t))
        if spec is None:
            regions, _, signals = _steps(t)
            spec = self.specs[id(t)] = (_shape(t), tuple(dk for dk, _, _ in regions),
                                        tuple(r.rank for r in t.reads + t.writes),
                                        tuple((g.rank, dk, g.name, g.index, dx) for g, (dk, dx) in zip(t.signals, signals)))
        return spec

    def canons(self, t: Task, first: int, n: int) -> list[tuple]:
        """Members ``first .. first+n-1``'s bumps, each as (rank relative to the task's, the base
        signal ``c`` maps it to), or UNWAITED (the hottest loop of the check: inlined)."""
        g, get, rank = self.g, self.maps.get, t.rank
        node = rank // g
        out = []
        signals = self.spec(t)[3]
        for i in range(first, first + n):
            member = []
            for r, dk, name, index, dx in signals:
                p = r + i * dk
                image = get((p, name, index + i * dx))
                member.append(((p // g - node, (p - rank) % g), image) if image is not None else UNWAITED)
            out.append(tuple(member))
        return out

    def base_canon(self, t: Task) -> list[tuple]:
        """:meth:`canons` of every member of a base rank's entry (each is compared G - 1 times)."""
        out = self.cache.get(id(t))
        if out is None:
            out = self.cache[id(t)] = self.canons(t, 0, t.count)
        return out

    def regions(self, t: Task, i: int) -> tuple:
        """Member ``i``'s region ranks relative to the task's (a put's reach other nodes)."""
        g, rank = self.g, t.rank
        _, steps, ranks, _ = self.spec(t)
        return tuple(((r + i * dk) // g - rank // g, (r + i * dk - rank) % g) for r, dk in zip(ranks, steps))

    def check(self) -> None:
        for q, b, key in self.pairs():
            for t, a, u, c, n in _chunks(self.queues[b][key], self.queues[q][key]):
                mine, theirs = self.spec(t), self.spec(u)
                if mine[0] != theirs[0]:
                    raise NotFoldable(f"{u.describe()} differs from {t.describe()} of rank {b}")
                if mine[1] != theirs[1] and n > 1 or self.regions(t, a) != self.regions(u, c):
                    raise NotFoldable(f"{u.describe()} reaches other ranks than {t.describe()} of rank {b}")
                if self.base_canon(t)[a:a + n] != self.canons(u, c, n):
                    raise NotFoldable(f"members {c}..{c + n - 1} of {u.describe()} bump other signals than "
                                      f"members {a}..{a + n - 1} of {t.describe()} of rank {b}")

    def folded(self) -> Schedule:
        """The base ranks' tasks, their bumps renamed to the base signals (real ranks kept)."""
        tasks: list[Task] = []
        for t in self.s.tasks:
            if t.rank % self.g:
                continue
            for part in self._renamed(t):
                tasks.append(dataclasses.replace(part, id=len(tasks)))
        return dataclasses.replace(self.s, tasks=tuple(tasks))

    def _renamed(self, t: Task) -> list[Task]:
        """``t`` with its bumps renamed (those of signals nobody waits on dropped): one group where
        the renamed indices still step evenly, else its members one by one."""
        if not t.signals:
            return [t]
        canon = self.base_canon(t)
        keep = [k for k in range(len(t.signals)) if canon[0][k] is not UNWAITED]
        steps = _steps(t)[2]
        if t.count == 1 or all(
                (canon[i][k] is UNWAITED) == (k not in keep) and (k not in keep or canon[i][k][1] == (
                    canon[0][k][1][0], canon[0][k][1][1] + i * (canon[1][k][1][1] - canon[0][k][1][1])))
                for i in range(1, t.count) for k in range(len(t.signals))):
            signals = tuple(Signal(t.signals[k].rank, *canon[0][k][1]) for k in keep)
            if t.count == 1:
                return [dataclasses.replace(t, signals=signals)]
            moved = tuple((steps[k][0], canon[1][k][1][1] - canon[0][k][1][1]) for k in keep)
            return [dataclasses.replace(t, signals=signals, step=dataclasses.replace(t.step, signals=moved))]
        return [dataclasses.replace(m, signals=tuple(Signal(g.rank, *image[1]) for g, image in zip(m.signals, canon[i])
                                                     if image is not UNWAITED))
                for i, m in enumerate(t.members())]


def fold_locals(s: Schedule) -> Schedule:
    """``s`` with one simulated rank per node (see the module docstring); raises
    :class:`NotFoldable` saying why not. Put groups are expanded first (their ranks may step
    across nodes)."""
    from .collapse import _flat_puts

    f = _Fold(_flat_puts(s))
    f.map_waits()
    f.check()
    return f.folded()
