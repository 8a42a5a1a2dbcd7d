"""SM role pools: the SMs of one launch on one rank, as tokens a controller can move between roles.

Each SM starts in a role (budgets give the initial split, like block-index ranges in a persistent
kernel) and takes that role's tasks in queue order. At every task boundary it checks the pool:
if its role has more SMs than its target, or no tasks left, it moves to a role that is under its
target and still has tasks, or retires. With targets equal to the static budgets nothing ever
moves, so a static schedule runs exactly as declared.

A controller (:mod:`mkernel.controller`) calls :meth:`RolePool.retarget`; the SMs follow at their next boundary.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from mkernel.ir import Op, Role, Task


class Item:
    """One queue entry's fields as the dispatch path reads them (:meth:`~mkernel.sim.runs.Waits._item`),
    read off the task once, when its SMs take its first member, and held by its runs (``Run.item``):
    ``parts``: (member 0's key, key step, count) of each wait (step 0 where its waits do not step:
    ``steps`` False); ``lone``: its one wait's part where it has one that steps by a non-zero index step
    (else None: the dispatcher's loop for such entries); ``held``: the waits known to hold where they do
    not step; ``joins``: whether its members may share a run (:func:`~mkernel.sim.runs.joins`); ``nvlink``:
    whether its op is an NVLink one, a copy, reduce or gather (a tuple's ``in`` compares each generically).

    Why: a task is a frozen dataclass, not a native class, so each field read from the compiled core
    is a generic attribute read (~180 instructions), and the caches that held these answers were
    dicts keyed by id(task) (a boxed int and ~350 instructions a lookup, ~500 a store); the 2 x 8
    every-node run takes 53k entries 97k times and resumes runs of them ~80k times. Native fields of
    one record made per entry cost a few each."""

    __slots__ = ("task", "op", "count", "parts", "steps", "lone", "held", "joins", "nvlink")

    def __init__(self, task: Task, op: Op, count: int, parts: list[tuple[int, int, int]], steps: bool,
                 joins: bool, nvlink: bool) -> None:
        self.task, self.op, self.count, self.parts, self.steps, self.joins = task, op, count, parts, steps, joins
        self.nvlink = nvlink
        self.lone: tuple[int, int, int] | None = parts[0] if steps and len(parts) == 1 and parts[0][1] else None
        self.held = 0


class RoleQueue:
    """One role of a pool: its queue, the entry and member its SMs take next, and its SMs (``target``,
    ``active``). Fields of a class of the compiled core: the take path reads and adds them as ints,
    where a role-keyed dict cost a lookup (and a boxed int) for each. ``item``: the :class:`Item` of
    the entry whose member was taken last (made by the dispatcher as member 0 is taken: members go in
    order, so a later member's entry is the one of the member before)."""

    __slots__ = ("tasks", "entry", "member", "target", "active", "item")

    def __init__(self, tasks: list[Task], target: int) -> None:
        self.tasks, self.entry, self.member, self.target, self.active = tasks, 0, 0, target, 0
        self.item: Item | None = None


class RolePool:
    """Targets, active counts and task queues of the roles of one launch on one rank (``roles``: a
    :class:`RoleQueue` each, in declaration order).

    A queue entry may be a group (``Task.count`` > 1): SMs take its members one by one, in order."""

    def __init__(self, budgets: dict[Role, int], queues: dict[Role, list[Task]],
                 work: Callable[[Task], float] | None = None) -> None:
        self.roles: dict[Role, RoleQueue] = {role: RoleQueue(queues.get(role, []), n) for role, n in budgets.items()}
        # remaining work per role (SM-us, for a controller), when a cost estimate is given
        self._work = work
        self.remaining = {role: sum(work(t) * t.count for t in queues.get(role, [])) if work else 0.0
                          for role in budgets}
        self.blocked = dict.fromkeys(budgets, 0)  # SMs of each role waiting on a signal now (kept with a controller,
        # their one reader: Dispatch._go, _block, _resume)

    @property
    def target(self) -> Mapping[Role, int]:
        """The SMs each role should have, read-only (:meth:`retarget` changes them)."""
        return MappingProxyType({role: q.target for role, q in self.roles.items()})

    @property
    def active(self) -> Mapping[Role, int]:
        """The SMs each role has now, read-only."""
        return MappingProxyType({role: q.active for role, q in self.roles.items()})

    def initial_roles(self) -> list[Role]:
        """One role per SM: each role's budget, in declaration order."""
        return [role for role, q in self.roles.items() for _ in range(q.target)]

    def has_work(self, role: Role) -> bool:
        q = self.roles[role]
        return q.entry < len(q.tasks)

    def retarget(self, targets: dict[Role, int]) -> None:
        """Change the SMs each role should have; SMs move at their next task boundary."""
        for role, n in targets.items():
            if role not in self.roles:
                raise ValueError(f"role {role.value} is not part of this launch")
            self.roles[role].target = n

    def next_task(self, role: Role) -> tuple[Role, Task, int] | None:
        """The role this SM should serve now, its next task (a group, perhaps) and the member it
        takes; or None to retire the SM. The caller has released ``role`` (its active count)."""
        q = self.roles[role]
        if q.entry < len(q.tasks) and q.active < q.target:
            return (role, *self._take(role, q))
        for other, q in self.roles.items():
            if q.entry < len(q.tasks) and q.active < q.target:
                return (other, *self._take(other, q))
        return None

    def take_many(self, role: Role, q: RoleQueue, item: Item, most: int) -> int:
        """For SMs of ``role`` (its :class:`RoleQueue` ``q``, whose queue has work) that each take their
        own role's next member, of the entry ``item`` (from ``q.member`` on): how many they take (up to
        ``most``, within one entry)."""
        first, count = q.member, item.count
        n = count - first
        n = most if most < n else n
        if first + n < count:
            q.member = first + n
        else:
            q.entry, q.member = q.entry + 1, 0
        q.active += n
        if self._work is not None:
            self.remaining[role] -= self._work(item.task) * n
        return n

    def _take(self, role: Role, q: RoleQueue) -> tuple[Task, int]:
        task, member = q.tasks[q.entry], q.member
        if member + 1 < task.count:
            q.member = member + 1
        else:
            q.entry, q.member = q.entry + 1, 0
        q.active += 1
        if self._work is not None:
            self.remaining[role] -= self._work(task)
        return task, member
