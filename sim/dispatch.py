"""How the SMs of a launch take their work: members of queue entries, in runs.

SMs are not processes. At each task boundary the freed SMs of a rank's launch, one after the other,
close their member and take their role's next one (:class:`~mkernel.sim.sms.RolePool`); SMs that
take neighbouring members of one group (``Task.count`` > 1) at one instant, ready with the same
cost (or blocked on one signal), form one :class:`Run`. A run costs one event however many members
it has, bumps every member's signals at its end, and frees its SMs together with every other run
of the rank that ends at the same instant, so a wave of tiles stays one run from wave to wave.

Every step is taken in the order the SMs would take it one by one (each ending SM counts itself out
of the computing SMs and the next member in, so a GEMM's speed class is the one it would see), so
the simulated times are those of the flat schedule. With a controller, a trace or stress the SMs
are named and go one by one (:meth:`Dispatch._pass`); otherwise they are counted
(:meth:`Dispatch._bulk`), a whole entry at a time. :class:`~mkernel.sim.engine.Model` does the work.
"""
from __future__ import annotations

from typing import Any, Final

from mkernel.ir import Op, Role, Task

from .environment import CountingEnvironment
from .runs import PUT, READY, Lane, Run, Timer, Waits  # (PUT: engine reads it here)
from .sms import Item
# the members the event path tests, read once: in Python 3.11 reading a member off its class
# (``Op.GEMM``) goes through EnumType's ``__getattr__`` hook, ~100 ns where a global is ~30; Final: compiled, a C
# static, where a global is a lookup in the module's dict at each use
COMPUTE: Final = Role.COMPUTE
GEMM: Final = Op.GEMM
ATTN: Final = Op.ATTN
NORM: Final = Op.NORM
RESUME: Final = "resume"  # the step of released runs' streaks (_released; _later's steps are the model's functions)


class Dispatch(Waits):
    """The SM side of :class:`~mkernel.sim.engine.Model` (a mixin: the model owns the board, the
    computing counts and the work; :class:`~mkernel.sim.runs.Waits` reads the members' waits)."""

    __deletable__ = ('env', 'spans', 'controller', '_shapes')  # (Model.close(): mypyc)
    env: CountingEnvironment
    speeds: list[float]
    spans: list[tuple] | None
    controller: Any
    arrays: bool
    compute_busy: list[float]
    _blocks: int  # runs numbered as they wait on the board (Run.seq)
    _computing: list[int]
    _compute_since: list[float]
    _shapes: dict[int, tuple]
    _one_by_one: bool
    _spanning: bool

    def _gemm_shape(self, task: Task) -> tuple:
        raise NotImplementedError

    def _start(self, run: Run) -> None:
        raise NotImplementedError

    def _work(self, run: Run) -> None:
        raise NotImplementedError

    def _pass(self, lane: Lane, sms: list[tuple[int, Role, Run | None, int]]) -> None:
        """SMs ``(slot, role, run, j)`` at a task boundary (SM j of ``run`` ending its member, unless
        ``run`` is None), one after the other: each closes its last member and takes its next; then
        the runs they form start, or wait."""
        runs: list[Run] = []
        for slot, role, ended, j in sms:
            if ended is not None:
                self._boundary(ended, j)
            picked = lane.pool.next_task(role)
            if picked is None:
                lane.alive -= 1
                continue
            self._take(lane, runs, slot, *picked)
        self._go(lane, runs)

    def _bulk(self, lane: Lane, chunks: list[tuple[Role, int, Run | None]]) -> None:
        """:meth:`_pass` for SMs counted, not named (no controller, trace or stress): each chunk is
        ``n`` SMs of one role (ending ``run``'s members, unless None), taking their own role's next
        members a whole entry at a time; the steps and their order are those of the SMs one by one."""
        pool, rank = lane.pool, lane.rank
        runs: list[Run] = []
        cells, roles = self.board.cells, pool.roles
        for role, n, ended in chunks:
            compute = role is COMPUTE
            q = roles[role]
            if ended is not None:
                q.active -= n
            while n and q.entry < len(q.tasks) and q.active < q.target:
                room = q.target - q.active
                first = q.member
                item = self._entry_item(q, q.tasks[q.entry], first)
                m = pool.take_many(role, q, item, n if n < room else room)
                n -= m
                lone = item.lone
                if lone is not None and not compute:
                    # the loop below over _waits_of's spans, written out (without the spans) for an entry
                    # off the compute role (no SM counts in or out) with one wait that steps by dx != 0:
                    # the row's intra reductions and broadcasts, whose members mostly block alone. The
                    # same test of each member, in order; a blocked member opens its own run, as _join
                    # would (it joins only this entry's member before it on the same key: none, dx != 0)
                    key0, dx, need = lone
                    ready = first  # the first member of the ready span being taken
                    for i in range(first, first + m):
                        key: Any = key0 + i * dx  # (mypyc: below, key may be None)
                        if (0 if (cell := cells.get(key)) is None else cell.count) < need:
                            if i > ready:
                                self._join(runs, lane, role, item, ready, i - ready, -1, None, 0, 0.0)
                            runs.append(Run(lane, role, item, i, -1, 0, key, need, 0.0))
                            ready = i + 1
                    if ready < first + m:
                        self._join(runs, lane, role, item, ready, first + m - ready, -1, None, 0, 0.0)
                    continue
                for i, part, (wait, key, need) in (self._waits_of(item, first, m) if item.parts else
                                                   [(first, m, READY)]):  # (lists: a native loop)
                    if wait >= 0:
                        if compute and ended is not None:
                            self._compute_edge(rank, -part)  # these SMs stop computing
                        if part == 1 and (not runs or runs[-1].key != key):
                            # what _join does with one member whose key is not the last run's: it joins
                            # only a run on its key, so it opens its own (a stepping wait's members, each alone)
                            runs.append(Run(lane, role, item, i, -1, wait, key, need, 0.0))
                        else:
                            self._join(runs, lane, role, item, i, part, wait, key, need, 0.0)
                    elif compute and ended is not None:  # each SM's -1 and +1: the count stays
                        speed = self.speeds[self._computing[rank]] if item.op is GEMM else 0.0
                        self._join(runs, lane, role, item, i, part, -1, None, 0, speed)
                    elif compute:  # SMs starting: each counts itself in
                        self._ready_split(runs, lane, role, item, i, part)
                    else:
                        self._join(runs, lane, role, item, i, part, -1, None, 0, 0.0)
            for _ in range(n):  # this role is done or full: the SM moves to another role, or retires
                if compute and ended is not None:
                    self._compute_edge(rank, -1)
                picked = pool.next_task(role)
                if picked is None:
                    lane.alive -= 1
                else:
                    self._take(lane, runs, -1, *picked)
        self._go(lane, runs)

    def _ready_split(self, runs: list[Run], lane: Lane, role: Role, item: Item, first: int, n: int) -> None:
        """``n`` members start on compute SMs, each counting itself in: runs split by GEMM speed."""
        rank = lane.rank
        speeds = self.speeds
        if item.op is not GEMM or speeds[self._computing[rank] + 1] == speeds[self._computing[rank] + n]:
            busy = self._compute_edge(rank, n)  # every op on the compute role counts (as in _ready)
            speed = speeds[busy] if item.op is GEMM else 0.0
            self._join(runs, lane, role, item, first, n, -1, None, 0, speed)
            return
        for i in range(first, first + n):
            self._join(runs, lane, role, item, i, 1, -1, None, 0, speeds[self._compute_edge(rank, 1)])

    def _join(self, runs: list[Run], lane: Lane, role: Role, item: Item, first: int, n: int, wait: int, key,
              need: int, speed: float, was: Run | None = None) -> None:
        """Members ``first .. first+n-1`` join the last run if they follow it in the same state, else
        open one (members that may not share a run open one each); ``was``: the run that held them
        while they waited, which is that one, ready now."""
        last = runs[-1] if runs else None
        if last is not None and last.role is role and last.wait == wait and last.key == key and last.speed == speed:
            parts = last.parts
            t, f, m = (last.task, last.first, last.n) if parts is None else parts[-1]
            if t is item.task and f + m == first and item.joins:
                last.n += n
                if parts is not None:
                    parts[-1][2] += n
                return
            if wait < 0 and first == 0 and f + m == t.count and self._spans(t, item):
                last.absorb(item.task, n)
                return
        if n > 1 and not item.joins:
            for i in range(first, first + n):
                runs.append(Run(lane, role, item, i, -1, wait, key, need, speed))
            return
        if was is not None:  # (a blocked run has not worked: only its wait state is left to clear)
            was.wait, was.key, was.need, was.speed = wait, key, need, speed
            runs.append(was)
            return
        run = Run(lane, role, item, first, -1, wait, key, need, speed)
        run.n = n
        runs.append(run)

    def _go(self, lane: Lane, runs: list[Run]) -> None:
        """The runs taken at one boundary, in order: each blocked one waits (:meth:`_block`, written
        out here: it was a call per blocked member), each ready one starts."""
        stress, board = self.stress > 0, self.board  # (methods called, not bound to locals: compiled, a C call)
        counts = lane.pool.blocked if self.controller is not None else None  # (only a controller reads them)
        for run in runs:
            if run.wait < 0:
                if stress:
                    self._start(run)
                else:
                    self._work(run)
            elif board.wait_key(run.key, run.need, run):
                run.seq = self._blocks = self._blocks + 1
                if counts is not None:
                    counts[run.role] += run.n
            else:
                self._resume([run])  # bumped since it was taken, by a run started before it here
        if lane.alive == 0 and not lane.done.triggered:
            lane.done.succeed()

    def _boundary(self, run: Run, j: int) -> None:
        """The SM ``j`` of ``run`` ends its member."""
        rank = run.lane.rank
        if run.role is COMPUTE:
            self._compute_edge(rank, -1)
        if self.spans is not None:
            t = run.member(j)
            self.spans.append((rank, run.role.value, run.slots[j], t.label or t.op.value, run.start, self.env.now))
        run.lane.pool.roles[run.role].active -= 1
        if self.controller is not None:
            self.controller(rank, run.lane.pool, self.env.now)

    def _take(self, lane: Lane, runs: list[Run], slot: int, role: Role, task: Task, i: int) -> None:
        """One SM takes member ``i`` of ``task``: it joins the last run if that is the member before,
        in the same state, else it opens a run."""
        item = self._entry_item(lane.pool.roles[role], task, i)
        wait, key, need = self._blocking(item, i, 0)
        speed = 0.0
        if wait < 0 and self.stress <= 0:
            speed = self._ready(lane.rank, role, task, 1)
        last = runs[-1] if runs else None
        if (last is not None and last.task is task and last.first + last.n == i and last.role is role
                and last.wait == wait and last.key == key and last.speed == speed and item.joins):
            last.n += 1
            if slot >= 0:
                last.slots.append(slot)
        else:
            runs.append(Run(lane, role, item, i, slot, wait, key, need, speed))

    def _spans(self, done: Task, item: Item) -> bool:
        """Whether ready members of ``item``'s entry may join a run that holds the last members of ``done``,
        the entry before it: GEMM tiles of one cost in a bulk run (no SM is named) without data, so
        they would start and end at the same instants as that run and be handled right after it at
        each (their reads checked and writes landed after its, as the hazard tracker sees them); as
        one run they cost one wake-up."""
        if not (self._spanning and item.op is GEMM and done.op is GEMM):
            return False
        shapes, task = self._shapes, item.task
        return (shapes.get(id(task)) or self._gemm_shape(task)) == (shapes.get(id(done)) or self._gemm_shape(done))

    def _ready(self, rank: int, role: Role, task: Task, n: int) -> float:
        """``n`` members start now (on the compute role they count as computing, one by one); their
        GEMM speed class (0 for other ops)."""
        if role is not COMPUTE:
            return 0.0
        busy = 0
        for _ in range(n):
            busy = self._compute_edge(rank, +1)
        return self.speeds[busy] if task.op is GEMM else 0.0

    def _block(self, run: Run) -> None:
        if not self.board.wait_key(run.key, run.need, run):
            self._resume([run])  # bumped since it was taken, by a task that ended at this instant
            return
        run.seq = self._blocks = self._blocks + 1
        if self.controller is not None:
            run.lane.pool.blocked[run.role] += run.n

    def _later(self, delay: float, then, run: Run) -> None:
        """Call ``then(self, runs)`` ``delay`` from now with every run of this lane that asked for the
        same step at the same time: SMs that end together take their next work together. The lanes'
        timers of one step and time are slots of one streak (:class:`~mkernel.sim.environment.Streak`): one
        queue entry for the lanes that run in lockstep (all 16 of the 2 x 8 every-node run, at each
        step). ``then`` is the model's function (``Model._paid``), not a method bound at each call: one
        object, matched by identity. (The lane's timers are scanned from the newest: mostly the one joined.)"""
        at = self.env.now + delay
        timers = run.lane.timers
        for j in range(len(timers) - 1, -1, -1):
            timer = timers[j]
            if timer.then is then and timer.at == at:
                timer.runs.append(run)
                return
        timer = Timer(then, at, run)
        timers.append(timer)
        if self.arrays:  # (the lanes' timers of one step and time: one streak)
            self.env.call_in_streak((then, at), at, run.lane.due, timer)
        else:
            self.env.call_at(at, run.lane.due, timer)

    def _due(self, timer: Timer) -> None:
        """``_later``'s ``timer`` is due: its step, for the runs that asked for it."""
        timers = timer.runs[0].lane.timers  # (most often the lane's oldest: found first)
        for j in range(len(timers)):
            if timers[j] is timer:  # (list.remove, by identity: its generic call cost ~320 instructions)
                timers.pop(j)
                break
        else:  # (a step due twice would run twice)
            raise AssertionError(f"rank {timer.runs[0].lane.rank}: a timer due at {timer.at} us is not pending")
        timer.then(self, timer.runs)

    def _until(self, at: float, then, run: Run) -> None:
        self._later(max(0.0, at - self.env.now), then, run)

    def _released(self, run: Run) -> None:
        """``run``'s wait holds now: it resumes at this instant, with the lane's other runs released now.
        This is ``_later(0.0, self._resume, run)`` with the lane's runs kept on the lane: a lane's
        pending resume slot is always one of this instant (it was queued now, at no delay, and time
        moves only once it has run), so the lane alone names it; the same slots and eids, in order."""
        lane = run.lane
        if lane.released is not None:
            lane.released.append(run)
            return
        lane.released = [run]
        now = self.env.now
        if self.arrays:  # (one streak for the lanes released at one instant, as _later's timers)
            self.env.call_in_streak((RESUME, now), now, lane.wake, lane)
        else:
            self.env.call_at(now, lane.wake, lane)

    def _wake(self, lane: Lane) -> None:
        """``lane``'s runs released at this instant resume (:meth:`_released`'s slot)."""
        runs, lane.released = lane.released, None
        self._resume(runs)  # type: ignore[arg-type]

    def _resume(self, runs: list[Run]) -> None:
        """Blocked runs whose wait now holds (those of one lane released at one instant, in order):
        each checks its other waits; the ready ones start, neighbouring members of one group
        together, split by GEMM speed class as their SMs resume one by one."""
        ready: list[Run] = []
        counted, stress = self.controller is not None, self.stress > 0
        for run in runs:
            # (a run that waited on the board: its SMs count no more)
            if counted and getattr(run, "seq", 0):  # type: ignore[arg-type]
                run.seq = 0
                run.lane.pool.blocked[run.role] -= run.n
            item = run.item
            at = run.wait + 1
            if at < len(item.parts):
                run.wait, run.key, run.need = self._blocking(item, run.first, at)
                if run.wait >= 0:
                    self._block(run)
                    continue
            else:  # (no wait left to check: what _blocking says)
                run.wait, run.key, run.need = READY
            if stress:
                self._start(run)
            else:
                ready.append(run)
        parts: list[Run] = []
        for run in ready if not self._one_by_one else []:  # (lists, not a tuple: compiled, a native list loop)
            role, item = run.role, run.item
            if role is COMPUTE:
                self._ready_split(parts, run.lane, role, item, run.first, run.n)
                continue
            run.speed = 0.0
            if not parts:  # _join with nothing to join (a run of several members waited as one only where _joins said so)
                parts.append(run)
                continue
            last = parts[-1]
            # the members after the last part's, of its entry: they join it, as _join does (every part is
            # ready, as the run now: wait -1, key None; and one not on the compute role has speed 0)
            if last.role is role and last.parts is None and last.task is run.task and last.first + last.n == run.first \
                    and item.joins:
                last.n += run.n
            elif item.op is not GEMM:  # what _join does then: the run (ready now, as set above) is a part of its
                parts.append(run)  # own; only GEMM tiles join a part of another entry (_spans)
            else:
                self._join(parts, run.lane, role, item, run.first, run.n, -1, None, 0, 0.0, run)
        for run in ready if self._one_by_one else []:
            for j in range(run.n):
                speed = self._ready(run.lane.rank, run.role, run.task, 1)
                tail = parts[-1] if parts else None
                if (tail is not None and tail.task is run.task and tail.first + tail.n == run.first + j
                        and tail.role is run.role and tail.speed == speed and run.item.joins):
                    tail.n += 1
                    tail.slots.append(run.slots[j])
                else:
                    parts.append(Run(run.lane, run.role, run.item, run.first + j, run.slots[j], -1, None, 0, speed))
        stress = self.stress > 0
        for part in parts:
            if stress:
                self._start(part)
            else:
                self._work(part)

    def _compute_edge(self, rank: int, step: int) -> int:
        if step > 0 and self._computing[rank] == 0:
            self._compute_since[rank] = self.env.now
        self._computing[rank] += step
        if step < 0 and self._computing[rank] == 0:
            self.compute_busy[rank] += self.env.now - self._compute_since[rank]
        return self._computing[rank]

