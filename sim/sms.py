"""SM role pools: the SMs of one launch on one rank, as tokens a controller can move between roles.

Each SM starts in a role (budgets give the initial split, like block-index ranges in a persistent
kernel) and takes that role's tasks in queue order. At every task boundary it checks the pool:
if its role has more SMs than its target, or no tasks left, it moves to a role that is under its
target and still has tasks, or retires. With targets equal to the static budgets nothing ever
moves, so a static schedule runs exactly as declared.

A controller (:mod:`mkernel.controller`) calls :meth:`RolePool.retarget`; the SMs follow at their next boundary.
"""
from __future__ import annotations

from collections.abc import Callable

from mkernel.ir import Role, Task


class RolePool:
    """Targets, active counts and task queues of the roles of one launch on one rank.

    A queue entry may be a group (``Task.count`` > 1): SMs take its members one by one, in order."""

    def __init__(self, budgets: dict[Role, int], queues: dict[Role, list[Task]],
                 work: Callable[[Task], float] | None = None) -> None:
        self.target: dict[Role, int] = dict(budgets)  # (typed: the compiled core compares and adds them as ints)
        self.active: dict[Role, int] = dict.fromkeys(budgets, 0)
        self._queues: dict[Role, list[Task]] = {role: queues.get(role, []) for role in budgets}
        self._at: dict[Role, list[int]] = {role: [0, 0] for role in budgets}  # entry, member
        # remaining work per role (SM-us, for a controller), when a cost estimate is given
        self._work = work
        self.remaining = {role: sum(work(t) * t.count for t in queues.get(role, [])) if work else 0.0
                          for role in budgets}
        self.blocked = dict.fromkeys(budgets, 0)  # SMs of each role waiting on a signal now (kept with a controller,
        # their one reader: Dispatch._go, _block, _resume)

    def initial_roles(self) -> list[Role]:
        """One role per SM: each role's budget, in declaration order."""
        return [role for role, n in self.target.items() for _ in range(n)]

    def has_work(self, role: Role) -> bool:
        return self._at[role][0] < len(self._queues[role])

    def retarget(self, targets: dict[Role, int]) -> None:
        """Change the SMs each role should have; SMs move at their next task boundary."""
        for role, n in targets.items():
            if role not in self.target:
                raise ValueError(f"role {role.value} is not part of this launch")
            self.target[role] = n

    def next_task(self, role: Role) -> tuple[Role, Task, int] | None:
        """The role this SM should serve now, its next task (a group, perhaps) and the member it
        takes; or None to retire the SM. The caller has released ``role`` (its active count)."""
        if self.has_work(role) and self.active[role] < self.target[role]:
            return (role, *self._take(role))
        for other in self.target:
            if self.has_work(other) and self.active[other] < self.target[other]:
                return (other, *self._take(other))
        return None

    def take_many(self, role: Role, most: int) -> tuple[Task, int, int]:
        """For SMs of ``role`` that each take their own role's next member (its queue has work):
        the entry, its first member taken, and how many (up to ``most``, within one entry)."""
        at = self._at[role]
        task, first = self._queues[role][at[0]], at[1]
        count: int = task.count  # (read once: an IR field is a generic attribute read from compiled code)
        n = count - first
        n = most if most < n else n
        if first + n < count:
            at[1] = at[1] + n  # (not +=: compiled, an item's += is a generic in-place add)
        else:
            at[0], at[1] = at[0] + 1, 0
        self.active[role] = self.active[role] + n
        if self._work is not None:
            self.remaining[role] -= self._work(task) * n
        return task, first, n

    def _take(self, role: Role) -> tuple[Task, int]:
        at = self._at[role]
        task, member = self._queues[role][at[0]], at[1]
        if member + 1 < task.count:
            at[1] = at[1] + 1
        else:
            at[0], at[1] = at[0] + 1, 0
        self.active[role] = self.active[role] + 1
        if self._work is not None:
            self.remaining[role] -= self._work(task)
        return task, member
