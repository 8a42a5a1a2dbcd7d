"""Exhaustive mode: every network delivery order a transport allows, for small cases.

The timed simulator shows one interleaving per seed. Here time is dropped: tasks run as soon as
their waits hold (each role still takes its queue in order, at most its SM budget at a time), and
the only freedom left is the order in which network messages land. A breadth-first search over
the set of delivered messages visits every reachable state once; the closure after a delivery is
deterministic, so that is every order. The first failure found is therefore a shortest
counterexample: the fewest deliveries that break the run.

What a transport allows:
- ``ib_rc`` / ``ibgda``: messages of one connection (source, destination) land in posting order;
  the flag write travels behind its data on the same connection.
- ``efa_srd``: any in-flight message may land next. With notify ``imm`` the flag is set when the
  data lands; with ``flag`` it is a message of its own; with ``fence`` it is posted only once every
  write to that peer has landed.

A run breaks on a hazard (a read of bytes not landed, or an output not landed at kernel end) or a
deadlock (nothing can run, nothing is in flight, tasks remain).
"""
from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass

from mkernel.cluster import Cluster
from mkernel.errors import InputError
from mkernel.ir import Op, Schedule

from .hazards import ArrivalTracker

MAX_IN_FLIGHT = 8
MAX_STATES = 200_000


@dataclass(frozen=True)
class Exploration:
    """Outcome of an exhaustive search."""

    states: int  # distinct delivered-sets visited
    ok: bool
    failure: str = ""  # what broke, for the counterexample
    counterexample: tuple[str, ...] = ()  # the deliveries, in order, that lead to it


@dataclass(frozen=True)
class _Msg:
    id: int
    task: int
    kind: str  # "data" or "flag"
    src: int
    dst: int


class _Run:
    """One replay: run the schedule with a given delivery sequence, then report the options."""

    def __init__(self, s: Schedule, c: Cluster, tracker: ArrivalTracker) -> None:
        self.s, self.c = s, c
        self.mode = c.notify_mode
        self.tracker = tracker
        self.counts: dict = defaultdict(int)
        self.done: set[int] = set()
        self.msgs: list[_Msg] = []
        self.in_flight: dict[int, _Msg] = {}
        self.failure = ""
        self.queues = s.queues()
        self.pos = dict.fromkeys(self.queues, 0)
        self.taken: dict = {key: [] for key in self.queues}
        self.left = defaultdict(int)  # (rank, launch) -> tasks not done
        for t in s.tasks:
            self.left[(t.rank, t.launch)] += 1

    def settle(self) -> None:
        """Run every task that can run, until nothing changes."""
        progress = True
        while progress and not self.failure:
            progress = False
            for key, queue in self.queues.items():
                rank, launch, role = key
                if launch > 0 and self.left[(rank, launch - 1)] > 0:
                    continue
                budget = self.s.launches[launch].budget(role)
                while len(self.taken[key]) < budget and self.pos[key] < len(queue):
                    self.taken[key].append(queue[self.pos[key]])
                    self.pos[key] += 1
                for task in list(self.taken[key]):
                    if all(self.counts[w.signal] >= w.count for w in task.waits):
                        self.taken[key].remove(task)
                        self._run(task)
                        progress = True
        if not self.failure and not self.in_flight and len(self.done) < len(self.s.tasks):
            waiting = [t.describe() for ts in self.taken.values() for t in ts]
            self.failure = f"deadlock: {'; '.join(waiting[:3])}"
        if not self.failure and len(self.done) == len(self.s.tasks):
            for rank in range(self.s.world):
                self.tracker.check_outputs_landed(rank, 0.0)
            self._hazard()

    def _run(self, task) -> None:
        self.tracker.check_reads(task, 0.0)
        self._hazard()
        self.done.add(task.id)
        self.left[(task.rank, task.launch)] -= 1
        if task.op is not Op.PUT:
            self.tracker.landed_writes(task)
            for sig in task.signals:
                self.counts[sig] += 1
            return
        self._post(task, "data")
        if self.mode == "flag" and self.c.transport == "efa_srd":
            self._post(task, "flag")
        if len(self.in_flight) > MAX_IN_FLIGHT:
            raise InputError(f"exhaustive mode allows at most {MAX_IN_FLIGHT} messages in flight; "
                             f"{len(self.in_flight)} are after {task.describe()}: use a smaller case")

    def _post(self, task, kind: str) -> None:
        msg = _Msg(len(self.msgs), task.id, kind, task.rank, task.writes[0].rank)
        self.msgs.append(msg)
        self.in_flight[msg.id] = msg

    def deliverable(self) -> list[_Msg]:
        if self.c.transport == "efa_srd":
            return list(self.in_flight.values())
        heads: dict = {}
        for msg in self.in_flight.values():  # ordered by posting
            heads.setdefault((msg.src, msg.dst), msg)
        return list(heads.values())

    def deliver(self, msg: _Msg) -> None:
        del self.in_flight[msg.id]
        task = self.s.tasks[msg.task]
        if msg.kind == "flag":
            for sig in task.signals:
                self.counts[sig] += 1
        else:
            self.tracker.landed_writes(task)
            if self.mode in ("imm",) or (self.mode == "flag" and self.c.transport != "efa_srd"):
                for sig in task.signals:
                    self.counts[sig] += 1
            elif self.mode == "fence" and not any(m.src == msg.src and m.dst == msg.dst and m.kind == "data"
                                                   for m in self.in_flight.values()):
                for other in self._fenced(msg.src, msg.dst):
                    self._post(self.s.tasks[other], "flag")
        self.settle()

    def _fenced(self, src: int, dst: int) -> list[int]:
        """PUTs from src to dst whose data has landed and whose flag is not yet posted."""
        flagged = {m.task for m in self.msgs if m.kind == "flag"}
        return [m.task for m in self.msgs if m.kind == "data" and m.src == src and m.dst == dst
                and m.id not in self.in_flight and m.task not in flagged]

    def _hazard(self) -> None:
        if self.tracker.hazards and not self.failure:
            h = self.tracker.hazards[0]
            self.failure = f"hazard: rank {h['rank']} {h['label']} read {h['region']} before it landed"

    def describe(self, msg: _Msg) -> str:
        return f"{msg.kind} of {self.s.tasks[msg.task].describe()} lands on rank {msg.dst}"


def explore(s: Schedule, c: Cluster) -> Exploration:
    """Search every delivery order; return the first (shortest) failing one, if any."""
    if c.nodes > 2 or c.gpus_per_node > 2:
        raise InputError(f"exhaustive mode is for at most 2 nodes x 2 GPUs, got {c.nodes}x{c.gpus_per_node}")
    base = ArrivalTracker(s)

    def replay(order: tuple[int, ...]) -> _Run:
        run = _Run(s, c, base.fresh())
        run.settle()
        for mid in order:
            if run.failure:
                break
            run.deliver(next(m for m in run.deliverable() if m.id == mid))
        return run

    seen = {frozenset()}
    frontier = deque([()])
    while frontier:
        order = frontier.popleft()
        run = replay(order)
        if run.failure:
            steps = tuple(run.describe(run.msgs[m]) for m in order)
            return Exploration(len(seen), False, run.failure, steps)
        for msg in run.deliverable():
            key = frozenset(order + (msg.id,))
            if key not in seen:
                seen.add(key)
                if len(seen) > MAX_STATES:
                    raise InputError(f"exhaustive mode stopped after {MAX_STATES} states: use a smaller case")
                frontier.append(order + (msg.id,))
    return Exploration(len(seen), True)
