"""The SimPy model of one schedule on one cluster.

Each rank runs its launches in stream order. In a launch, the SMs of a :class:`~mkernel.sim.sms.RolePool`
each serve one role at a time, taking that role's tasks (or a group's members) in queue order; an
SM waits for its task's signals, then spends the task's cost. An optional controller may move SMs
between roles at task boundaries. SMs are not processes: at each boundary the freed SMs pick their
next members in order, and SMs that pick consecutive members of one group at one instant, ready
with the same cost (or blocked on one signal), form a :class:`Run`: one cost, one event, each
member's signals bumped at its end. The order of every step is the order the SMs took one by one,
so the times are theirs; a wave of tiles costs a few events however wide it is. Costs:

- GEMM: :func:`cost.gemm_us` on the SM (a roofline with a tile-size efficiency; faster per SM while
  fewer of the rank's SMs compute).
- COPY/REDUCE/GATHER: the SM streams its local bytes at ``sm_stream_gb_per_s`` while it drives one flow
  per peer region over the NVLink ports (source egress, destination ingress), capped together by
  what one SM can copy over NVLink (``sm_copy_gb_per_s``); then the NVLink latency. A run of n
  members is one flow of n times the weight.
- PUT: handed to :class:`~mkernel.sim.network.Network` (ring, proxy, NIC, transport), one member at a time.

Every task's reads are checked for bytes that have not arrived (:mod:`mkernel.sim.hazards`) when
it starts; its writes count as arrived when it ends (a PUT's when the data lands). Hazard tracking
and data runs take flat schedules (the backend expands groups for them).

``stress`` (for hazard hunting, not timing) scales every GEMM, NVLink latency and SM start by a
seeded random factor, so races that a bug allows get a chance to show; it runs one member per run.

Signals are epoch-stamped counters. A flag stored to a peer lands one NVLink latency after it is
issued, unless the task already waited that latency for its own peer stores. If the event queue
drains while SMs still wait, :class:`DeadlockError` lists every waiter.
"""
from __future__ import annotations

import math
import random

from mkernel.cluster import Cluster
from mkernel.errors import DeadlockError
from mkernel.ir import Op, Role, Schedule, Signal, Task, expand

from . import cost
from .data import DataStore
from .faults import Faults, Injector
from .flows import FlowNet, Link
from .hazards import ArrivalTracker, NullTracker
from .network import Network
from .signals import CountingEnvironment, SignalBoard
from .sms import RolePool

NVLINK_OPS = (Op.COPY, Op.REDUCE, Op.GATHER)


class Lane:
    """One launch on one rank: its role pool, the SMs not yet retired, and the event of its end."""

    __slots__ = ("rank", "pool", "alive", "done")

    def __init__(self, rank: int, pool: RolePool, alive: int, done) -> None:
        self.rank, self.pool, self.alive, self.done = rank, pool, alive, done


class Run:
    """Members ``first .. first + n - 1`` of one queue entry, taken together by the SMs ``slots``.

    ``wait`` >= 0: blocked on that wait (``key`` reaching ``need``); ``speed``: the GEMM speed
    class its members were taken at (:func:`cost.sm_speed`); ``start``: when its work began."""

    __slots__ = ("lane", "role", "task", "first", "n", "slots", "wait", "key", "need", "speed", "start", "paid",
                 "later")

    def __init__(self, lane: Lane, role: Role, task: Task, first: int, slot: int, wait: int, key, need: int,
                 speed: float) -> None:
        self.lane, self.role, self.task, self.first, self.n, self.slots = lane, role, task, first, 1, [slot]
        self.wait, self.key, self.need, self.speed, self.start = wait, key, need, speed, 0.0
        self.paid, self.later = False, ()  # a peer copy's signals need no flag latency; flags in flight

    def member(self, j: int = 0) -> Task:
        return self.task.member(self.first + j) if self.task.count > 1 else self.task

    def signal_keys(self):
        """(key, times) of every bump its members make, member by member (a signal that does not
        step is bumped n times at once)."""
        t, n = self.task, self.n
        steps = t.step.signals if t.count > 1 and t.step.signals else None
        if steps is None:
            return [((g.rank, g.name, g.index), n) for g in t.signals]
        out = [((g.rank, g.name, g.index), n) for g, (dk, dx) in zip(t.signals, steps) if not (dk or dx)]
        moving = [(g, dk, dx) for g, (dk, dx) in zip(t.signals, steps) if dk or dx]
        for i in range(self.first, self.first + n):
            out += [((g.rank + i * dk, g.name, g.index + i * dx), 1) for g, dk, dx in moving]
        return out


class Model:
    """Everything one simulated run owns: the environment, ports, network, signals and metrics."""

    def __init__(self, s: Schedule, c: Cluster, data: DataStore | None, *, epoch: int = 1, seed: int = 0,
                 trace: bool = False, stress: float = 0.0, track_hazards: bool = True,
                 controller=None, faults: Faults | None = None, progress=None) -> None:
        self.quiet = data is None and not track_hazards  # nothing observes when writes land: steps may merge
        if not self.quiet:
            s = expand(s)  # the hazard tracker and the data store follow tasks one by one
        self.s, self.c, self.data = s, c.for_variant(s.variant), data
        c = self.c
        self.env = CountingEnvironment()
        self.flows = FlowNet(self.env, record=trace)
        self.board = SignalBoard(self.env, epoch)
        self.tracker = ArrivalTracker(s) if track_hazards else NullTracker()
        self.itemsize = {b.name: b.itemsize for b in s.buffers}
        self.stress = stress
        self.stress_rng = random.Random(seed ^ 0x5EED)
        self.inject = Injector(faults)
        nv = cost.bytes_per_us(c.nvlink.bw_gb_per_s)
        self.nv_out = [Link("nvlink.out", nv) for _ in range(s.world)]
        self.nv_in = [Link("nvlink.in", nv) for _ in range(s.world)]
        self.net = Network(self, seed)
        self.sm_copy = cost.bytes_per_us(c.sm_copy_gb_per_s)
        self.sm_stream = cost.bytes_per_us(c.gpu.sm_stream_gb_per_s)
        self.finish = [math.nan] * s.world
        self.net_bytes = [0.0] * s.world
        self.host_bytes = [0.0] * s.world
        self.compute_busy = [0.0] * s.world  # union of time with at least one compute task running
        self._computing = [0] * s.world
        self._compute_since = [0.0] * s.world
        self.blocked: dict[int, Run] = {}  # blocked runs, by id
        self.controller = controller  # called as controller(rank, pool, now_us) at task boundaries
        self.pools: dict[int, RolePool] = {}
        self.spans: list[tuple] | None = [] if trace else None
        self.proxy_spans: list[tuple] = []
        self.queues = s.queues()
        self._gemm_cache: dict = {}
        self._timers: dict[tuple, list[Run]] = {}  # (lane, step, time) -> runs due then
        self.progress = progress  # progress(variant, tasks ended, tasks), every 1/200 of them
        self._total = sum(t.count for t in s.tasks)
        self._ended, self._told = 0, 0

    # -- running -------------------------------------------------------------------------------
    def run(self) -> None:
        for rank in range(self.s.world):
            self.env.process(self._rank(rank))
        self.env.run()
        if self.blocked:
            lines = []
            for run in self.blocked.values():
                t, sig = run.member(), Signal(*run.key)
                lines.append(f"rank {t.rank} role {t.role.value} {t.describe()} waits for {sig} >= {run.need}, "
                             f"has {self.board.count(sig)}")
            injected = self.inject.report()
            raise DeadlockError(f"deadlock at t={self.env.now:.3f} us in epoch {self.board.epoch}: "
                                f"{len(lines)} tasks wait on signals nothing will bump"
                                + (f" ({injected})" if injected else "") + ":\n  " + "\n  ".join(lines))

    def _rank(self, rank: int):
        for li, launch in enumerate(self.s.launches):
            if li > 0:
                yield self.env.timeout(self.c.launch_us)
            if self.c.gpu.fused_call_us:  # entry and exit of the fused kernel, paid once per call
                yield self.env.timeout(self.c.gpu.fused_call_us)
            queues = {role: self.queues.get((rank, li, role), []) for role, _ in launch.sms}
            work = (lambda t: cost.sm_work_us(t, self.itemsize, self.c)) if self.controller else None
            pool = RolePool(dict(launch.sms), queues, work)
            self.pools[rank] = pool
            if self.controller is not None:  # the initial split is the controller's too
                self.controller(rank, pool, self.env.now)
            roles = pool.initial_roles()
            lane = Lane(rank, pool, len(roles), self.env.event())
            self._pass(lane, [(slot, role, None, 0) for slot, role in enumerate(roles)])
            yield lane.done
        self.finish[rank] = self.env.now
        self.tracker.check_outputs_landed(rank, self.env.now)

    # -- SMs taking work -------------------------------------------------------------------------
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
        for run in runs:
            if run.wait >= 0:
                self._block(run)
            else:
                self._start(run)
        if lane.alive == 0 and not lane.done.triggered:
            lane.done.succeed()

    def _boundary(self, run: Run, j: int) -> None:
        """The SM ``j`` of ``run`` ends its member."""
        rank = run.lane.rank
        if run.role is Role.COMPUTE:
            self._compute_edge(rank, -1)
        if self.spans is not None:
            t = run.member(j)
            self.spans.append((rank, run.role.value, run.slots[j], t.label or t.op.value, run.start, self.env.now))
        run.lane.pool.active[run.role] -= 1
        if self.controller is not None:
            self.controller(rank, run.lane.pool, self.env.now)

    def _take(self, lane: Lane, runs: list[Run], slot: int, role: Role, task: Task, i: int) -> None:
        """One SM takes member ``i`` of ``task``: it joins the last run if that is the member before,
        in the same state, else it opens a run."""
        wait, key, need = self._blocking(task, i, 0)
        speed = 0.0
        if wait < 0 and self.stress <= 0:
            speed = self._ready(lane.rank, role, task, 1)
        last = runs[-1] if runs else None
        if (last is not None and last.task is task and last.first + last.n == i and last.role is role
                and last.wait == wait and last.key == key and last.speed == speed and self._joins(task)):
            last.n += 1
            last.slots.append(slot)
        else:
            runs.append(Run(lane, role, task, i, slot, wait, key, need, speed))

    def _joins(self, task: Task) -> bool:
        """Whether members of ``task`` may share a run: not under stress (each SM starts late by its
        own draw), not for puts (each is its own message), and not for a peer copy whose members
        reach other ranks (each its own flow)."""
        if task.count == 1 or self.stress > 0 or task.op is Op.PUT:
            return False
        return task.op not in NVLINK_OPS or not any(r[0] for r in task.step.regions)

    def _blocking(self, task: Task, i: int, at: int) -> tuple[int, tuple | None, int]:
        """The first of member ``i``'s waits from ``at`` on that does not hold: (index, key, count),
        or (-1, None, 0)."""
        steps = task.step.waits if task.count > 1 and task.step.waits else None
        for j in range(at, len(task.waits)):
            w = task.waits[j]
            g = w.signal
            key = (g.rank, g.name, g.index + i * steps[j] if steps else g.index)
            if self.board.count_key(key) < w.count:
                return j, key, w.count
        return -1, None, 0

    def _ready(self, rank: int, role: Role, task: Task, n: int) -> float:
        """``n`` members start now (on the compute role they count as computing, one by one); their
        GEMM speed class (0 for other ops)."""
        if role is not Role.COMPUTE:
            return 0.0
        busy = 0
        for _ in range(n):
            busy = self._compute_edge(rank, +1)
        return cost.sm_speed(self.c, busy) if task.op is Op.GEMM else 0.0

    def _block(self, run: Run) -> None:
        if not self.board.wait_key(run.key, run.need, lambda: self._later(0.0, self._resume, run)):
            self._resume([run])  # bumped since it was taken, by a task that ended at this instant
            return
        run.lane.pool.blocked[run.role] += run.n
        self.blocked[id(run)] = run

    def _resume(self, runs: list[Run]) -> None:
        """Blocked runs whose wait now holds (those of one lane released at one instant, in order):
        each checks its other waits; the ready ones start, neighbouring members of one group
        together, split by GEMM speed class as their SMs resume one by one."""
        ready: list[Run] = []
        for run in runs:
            if id(run) in self.blocked:
                run.lane.pool.blocked[run.role] -= run.n
                del self.blocked[id(run)]
            run.wait, run.key, run.need = self._blocking(run.task, run.first, run.wait + 1)
            if run.wait >= 0:
                self._block(run)
            elif self.stress > 0:
                self._start(run)
            else:
                ready.append(run)
        parts: list[Run] = []
        for run in ready:
            for j in range(run.n):
                speed = self._ready(run.lane.rank, run.role, run.task, 1)
                last = parts[-1] if parts else None
                if (last is not None and last.task is run.task and last.first + last.n == run.first + j
                        and last.role is run.role and last.speed == speed and self._joins(run.task)):
                    last.n += 1
                    last.slots.append(run.slots[j])
                else:
                    parts.append(Run(run.lane, run.role, run.task, run.first + j, run.slots[j], -1, None, 0, speed))
        for part in parts:
            self._start(part)

    # -- runs doing their work -------------------------------------------------------------------
    def _start(self, run: Run) -> None:
        if self.stress > 0:  # a stressed SM starts up to 1+stress us late
            self.env.timeout(self._stretch(1.0)).callbacks.append(lambda _ev: self._stressed(run))
            return
        self._work(run)

    def _stressed(self, run: Run) -> None:
        self._ready(run.lane.rank, run.role, run.task, run.n)
        run.speed = cost.sm_speed(self.c, self._computing[run.lane.rank]) if run.task.op is Op.GEMM else 0.0
        self._work(run)

    def _work(self, run: Run) -> None:
        task, op = run.task, run.task.op  # a run's members share shapes, and ranks but for a put's or a copy's
        if task.count > 1 and (op is Op.PUT or (op in NVLINK_OPS and not self._joins(task))):
            task = run.member()
        now = run.start = self.env.now
        if op is Op.PUT:
            self.env.process(self._put(run, task))
            return
        self.tracker.check_reads(task, now)
        slow = self.inject.slowdown(task.rank)
        if op is Op.GEMM:
            us = self._gemm_us(task, run.speed if run.speed else cost.sm_speed(self.c, self._computing[task.rank]))
            self._later(self._stretch(us) * slow, self._worked, run)
        elif op is Op.ATTN:
            self._later(self._stretch(cost.attn_us(task, self.itemsize, self.c)) * slow, self._worked, run)
        elif op is Op.NORM:
            self._later(cost.local_bytes(task, self.itemsize) / self.sm_stream * slow, self._worked, run)
        elif op in NVLINK_OPS:
            self._nvlink(run, task)
        else:
            self._worked([run])

    def _later(self, delay: float, then, run: Run) -> None:
        """Call ``then(runs)`` ``delay`` from now with every run of this lane that asked for the same
        step at the same time: SMs that end together take their next work together."""
        key = (id(run.lane), then, self.env.now + delay)
        runs = self._timers.get(key)
        if runs is None:
            runs = self._timers[key] = []
            self.env.timeout(delay).callbacks.append(lambda _ev: then(self._timers.pop(key)))
        runs.append(run)

    def _until(self, at: float, then, run: Run) -> None:
        self._later(max(0.0, at - self.env.now), then, run)

    def _gemm_us(self, task: Task, speed: float) -> float:
        key = (id(task), speed)
        us = self._gemm_cache.get(key)
        if us is None:
            us = self._gemm_cache[key] = cost.gemm_us_at(task, self.itemsize, self.c, speed)
        return us

    def _worked(self, runs: list[Run]) -> None:
        """Compute-like runs' work is done: their writes land, their signals go; a GEMM or attention
        tile on the compute role then pays the fused kernel's per-tile cost before its SM is free."""
        free = []
        tile = self.c.gpu.fused_tile_us
        for run in runs:
            self._landed(run)
            self._signal(run, False)
            if run.role is Role.COMPUTE and tile and run.task.op in (Op.GEMM, Op.ATTN):
                self._later(tile, self._free, run)  # fill, epilogue, task row
            else:
                free.append(run)
        if free:
            self._free(free)

    def _free(self, runs: list[Run]) -> None:
        if self.progress is not None:
            self._ended += sum(run.n for run in runs)
            if self._ended - self._told >= self._total / 200 or self._ended == self._total:
                self._told = self._ended
                self.progress(self.s.variant, self._ended, self._total)
        self._pass(runs[0].lane, [(slot, run.role, run, j) for run in runs for j, slot in enumerate(run.slots)])

    def _landed(self, run: Run) -> None:
        if self.quiet:
            return
        for j in range(run.n):
            t = run.member(j)
            self.tracker.landed_writes(t)
            if self.data is not None:
                self.data.apply(t)

    def _signal(self, run: Run, paid: bool) -> None:
        """Every member's signals: bumped now, or for a flag stored to a peer one NVLink latency on
        (unless the task already waited that latency for its own peer stores)."""
        rank, later = run.task.rank, []
        for key, times in run.signal_keys():
            if key[0] == rank or paid:
                self.board.bump_key(key, times)
            else:
                later.append((key, times))
        if later:
            run.later = later
            self._later(self.c.nvlink.latency_us, self._flags, run)

    def _flags(self, runs: list[Run]) -> None:
        for run in runs:
            for key, times in run.later:
                self.board.bump_key(key, times)

    def _put(self, run: Run, task: Task):
        sources = self.data.snapshot(task) if self.data is not None else None
        yield from self.net.send(task, sources)
        self._free([run])

    def _compute_edge(self, rank: int, step: int) -> int:
        if step > 0 and self._computing[rank] == 0:
            self._compute_since[rank] = self.env.now
        self._computing[rank] += step
        if step < 0 and self._computing[rank] == 0:
            self.compute_busy[rank] += self.env.now - self._compute_since[rank]
        return self._computing[rank]

    def _nvlink(self, run: Run, task: Task) -> None:
        """Local bytes stream while one weighted flow carries every peer transfer of the members;
        then the fused kernel's load round trips, and its per-task cost. One wake-up at the flow's
        end and one at the run's end: the times of the same steps taken one after the other."""
        run.paid = cost.touches_peer(task)
        tail = self.c.gpu.fused_peer_task_us if run.paid else 0.0  # the fused kernel's fixed cost of a peer task
        merged = tail if self.quiet else 0.0
        transfers = cost.remote_transfers(task, self.itemsize)
        local_us = cost.local_bytes(task, self.itemsize) / self.sm_stream * self.inject.slowdown(task.rank)
        start = self.env.now
        if not transfers:
            self._until((start + (local_us + cost.step_us(task, self.c))) + merged, self._copied, run)
            return
        half = self.c.nvlink.half_efficiency_bytes
        legs = []
        for src, dst, b in transfers:
            legs += [(self.nv_out[src], b, b + half), (self.nv_in[dst], b, b + half)]
        size = sum(b + half for _, _, b in transfers)

        def moved(_ev) -> None:
            # the fused kernel's steps each wait a peer round trip: latency the port does not see
            rtt = self._stretch(self.c.nvlink.latency_us + cost.step_us(task, self.c))
            self._until((max(self.env.now, start + local_us) + rtt) + merged, self._copied, run)
        self.flows.transfer_legs(size, legs, self.sm_copy, run.n).callbacks.append(moved)

    def _copied(self, runs: list[Run]) -> None:
        tail = self.c.gpu.fused_peer_task_us
        now = []
        for run in runs:
            self._landed(run)
            if run.paid and tail and not self.quiet:
                self._later(tail, self._paid, run)
            else:
                now.append(run)
        if now:
            self._paid(now)

    def _paid(self, runs: list[Run]) -> None:
        for run in runs:
            self._signal(run, run.paid)
        self._free(runs)

    def _stretch(self, us: float) -> float:
        """Under stress, a duration scaled by a seeded factor in [1/(1+stress), 1+stress]."""
        if self.stress <= 0:
            return us
        return us * (1.0 + self.stress) ** self.stress_rng.uniform(-1.0, 1.0)

    def bump_all(self, signals: tuple[Signal, ...]) -> None:
        for sig in signals:
            self.board.bump(sig)

    # -- metrics -------------------------------------------------------------------------------
    def nvlink_bytes(self) -> list[float]:
        return [link.bytes for link in self.nv_out]

    def all_links(self) -> list[tuple[int, Link]]:
        """(rank, link) for every modelled link."""
        out = [(r, l) for r, l in enumerate(self.nv_out)] + [(r, l) for r, l in enumerate(self.nv_in)]
        for per, links in ((self.net.nic_out, "out"), (self.net.nic_in, "in")):
            out += [(r, l) for r, ls in enumerate(per) for l in ls]
        return out
