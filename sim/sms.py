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

from mkernel.ir import Role, Task


class RoleQueue:
    """One role of a pool: its queue, the entry and member its SMs take next, and its SMs (``target``,
    ``active``). Fields of a class of the compiled core: the take path reads and adds them as ints,
    where a role-keyed dict cost a lookup (and a boxed int) for each."""

    __slots__ = ("tasks", "entry", "member", "target", "active")

    def __init__(self, tasks: list[Task], target: int) -> None:
        self.tasks, self.entry, self.member, self.target, self.active = tasks, 0, 0, target, 0


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

    def take_many(self, role: Role, q: RoleQueue, most: int) -> tuple[Task, int, int]:
        """For SMs of ``role`` (its :class:`RoleQueue` ``q``, whose queue has work) that each take their
        own role's next member: the entry, its first member taken, and how many (up to ``most``, within one entry)."""
        task, first = q.tasks[q.entry], q.member
        count: int = task.count  # (read once: an IR field is a generic attribute read from compiled code)
        n = count - first
        n = most if most < n else n
        if first + n < count:
            q.member = first + n
        else:
            q.entry, q.member = q.entry + 1, 0
        q.active += n
        if self._work is not None:
            self.remaining[role] -= self._work(task) * n
        return task, first, n

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
