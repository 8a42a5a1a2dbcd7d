"""The SimPy model of one schedule on one cluster.

Each rank runs its launches in stream order. In a launch, the SMs of a :class:`~mkernel.sim.sms.RolePool`
each serve one role at a time, taking that role's tasks (or a group's members) in queue order; an
SM waits for its task's signals, then spends the task's cost. An optional controller may move SMs
between roles at task boundaries. How SMs take work, and run neighbouring members of a group as
one run, is :mod:`mkernel.sim.dispatch`; this module does the work. Costs:

- GEMM: :func:`cost.gemm_us` on the SM (a roofline with a tile-size efficiency; faster per SM while
  fewer of the rank's SMs compute).
- COPY/REDUCE/GATHER: the SM streams its local bytes at ``sm_stream_gb_per_s`` while it drives one flow
  per peer region over the NVLink ports (source egress, destination ingress), capped together by
  what one SM can copy over NVLink (``sm_copy_gb_per_s``); then the NVLink latency. A run of n
  members is one flow of n times the weight.
- PUT: handed to :class:`~mkernel.sim.network.Network` (ring, proxy, NIC, transport), one member at a time.

Every task's reads are checked for bytes that have not arrived (:mod:`mkernel.sim.hazards`, logged
and decided when the run ends: :mod:`mkernel.sim.hazardlog`) when it starts; its writes count as
arrived when it ends (a PUT's when the data lands): a run's members all at once, as they start and
end together. Data and stress runs take the flat schedule (the model expands the groups).

``stress`` (for hazard hunting, not timing) scales every GEMM, NVLink latency and SM start by a
seeded random factor, so races that a bug allows get a chance to show; it runs the flat schedule.

Signals are counters (:class:`~mkernel.sim.signals.SignalBoard`). A flag stored to a peer lands
one NVLink latency after it is issued, unless the task already waited that latency for its own peer
stores. If the event queue drains while SMs still wait, :class:`DeadlockError` lists the first
waiters and counts the rest.
"""
from __future__ import annotations

import math
import random
from functools import partial
from operator import attrgetter
from typing import Final

from mkernel import cost
from mkernel.cluster import Cluster
from mkernel.errors import DeadlockError
from mkernel.ir import Schedule, Task, expand
from mkernel.members import RegionTable

from .calllog import CallLog, Forward
from .data import DataStore
from .dispatch import ATTN, COMPUTE, GEMM, NORM, PUT, Dispatch, Lane, Run
from .environment import CountingEnvironment
from .faults import Faults, Injector
from .flows import FlowNet, Link
from .hazardlog import LoggedTracker
from .hazards import NullTracker
from .library import LibraryCalls
from .network import Network
from .signals import SignalBoard, flat_keys, run_bumps, signal_of
from .sms import RolePool
from . import nvplan, tiles

TILED: Final = (GEMM, ATTN)  # the compute ops that pay the fused kernel's per-tile cost (Model._worked)
DEADLOCK_LINES: Final = 12  # waiters a deadlock error lists (the first ones blocked); the rest are counted


class Model(Dispatch):
    """Everything one simulated run owns: the environment, ports, network, signals and metrics."""

    __deletable__ = ('s', 'c', 'data', 'flows', 'tracker', 'log', 'inject', 'nv_out', 'nv_in', 'net', 'library',
                     'pools', 'proxy_spans', 'queues', '_gemm_cache', 'played', '_nv_plans', 'nv_shapes', '_nv_entries',
                     'progress', 'stress_rng', 'itemsize')  # (close() drops them: a compiled class deletes only these)

    def __init__(self, s: Schedule, c: Cluster, data: DataStore | None, *, epoch: int = 1, seed: int = 0,
                 trace: bool = False, stress: float = 0.0, track_hazards: bool = True,
                 controller=None, faults: Faults | None = None, progress=None, fold: int = 1,
                 regions: RegionTable | None = None, arrays: bool = True, tracker=None) -> None:
        self.quiet = data is None and not track_hazards  # nothing observes when writes land: steps may merge
        if data is not None or stress > 0:
            # the data store follows tasks one by one; stress draws each member's delays in the flat
            # schedule's order (a group bumps its fixed signals first, so waiters would wake, and draw,
            # in another order)
            s, regions = expand(s), None  # (``regions``: the given schedule's region table, for the tracker)
        self.s, self.c, self.data = s, c.for_variant(s.variant), data
        c = self.c
        # fold > 1: the schedule holds one rank per node, every fold local ranks alike (sim/localfold.py):
        # each rank's resources and signals are its base's (home[rank])
        self.fold = fold
        self.home = [r - r % fold for r in range(s.world)]
        self.ranks = range(0, s.world, fold)
        self.env = CountingEnvironment()
        self.flows = FlowNet(self.env, record=trace)
        self.board = SignalBoard(epoch, self._released, self.home if fold > 1 else None)
        # ``tracker(s)``: another hazard tracker (a test's); the run's checks and landings go to ``log``, a logged
        # tracker's own (sim/calllog.py: a native call each) or handed to any other tracker as they are made
        self.tracker = tracker(s) if tracker else LoggedTracker(s, regions) if track_hazards else NullTracker()
        self.log: CallLog = self.tracker.log if isinstance(self.tracker, LoggedTracker) else Forward(self.tracker)
        self.itemsize = {b.name: b.itemsize for b in s.buffers}
        self.stress = stress
        self.stress_rng = random.Random(seed ^ 0x5EED)
        self.inject = Injector(faults)
        self.slow = [self.inject.slowdown(r) for r in range(s.world)]  # each rank's injected compute slowdown
        nv = cost.bytes_per_us(c.nvlink.bw_gb_per_s)
        self.nv_out = [Link("nvlink.out", nv) for _ in range(s.world)]
        self.nv_in = [Link("nvlink.in", nv) for _ in range(s.world)]
        self.net = Network(self, seed)
        self.library = LibraryCalls(self)  # baseline launches that stand for a library call
        most = max([s.num_sms, c.gpu.sms] + [sum(n for _, n in launch.sms) for launch in s.launches])
        self.speeds = [cost.sm_speed(c, busy) for busy in range(most + 1)]  # GEMM speed class by SMs computing
        self.sm_copy = cost.bytes_per_us(c.sm_copy_gb_per_s)
        self.sm_stream = cost.bytes_per_us(c.gpu.sm_stream_gb_per_s)
        self.finish = [math.nan] * s.world
        self.net_bytes = [0.0] * s.world
        self.host_bytes = [0.0] * s.world
        self.compute_busy = [0.0] * s.world  # union of time with at least one compute task running
        self._computing = [0] * s.world
        self._compute_since = [0.0] * s.world
        self._blocks = 0  # numbers runs as they wait on the board (Run.seq, from 1: blocked() lists them in that order)
        self.controller = controller  # called as controller(rank, pool, now_us) at task boundaries
        self.pools: dict[int, RolePool] = {}
        self.spans: list[tuple] | None = [] if trace else None
        self.proxy_spans: list[tuple] = []
        self.queues = s.queues()
        self._gemm_cache: dict = {}
        self.played: dict[tuple, tuple[float, int]] = {}  # played launches' (end, tiles) by kind (sim/tiles.py)
        self._shapes: dict[int, tuple] = {}  # GEMM cost keys by id(task)
        self._nv_plans: dict[tuple, tuple] = {}  # NVLink cost plans by what they are a function of (_nvlink)
        self.nv_shapes = nvplan.Shapes(s, regions) if regions is not None else None  # (their keys, read in bulk)
        self._nv_entries: dict[int, tuple] = {}  # the same, by id(entry)
        self.arrays = arrays  # lanes' timers of one step and time as one streak (False: one entry each)
        self.progress = progress  # progress(variant, tasks ended, tasks), every 1/200 of them
        self._one_by_one = controller is not None or trace or stress > 0  # SMs named: roles move, spans, draws
        self._spanning = data is None and not self._one_by_one  # GEMM runs may span entries (Dispatch._spans)
        self._total: int = sum(map(attrgetter("count"), s.tasks))  # (typed: _free's compares are native)
        self._ended, self._told = 0, 0
        self._every: float = self._total / 200  # (the members ended between two progress calls)

    # -- running -------------------------------------------------------------------------------
    def run(self) -> None:
        for rank in self.ranks:
            self.env.start(self._rank(rank))
        self.env.run()
        # (a blocked run holds its SMs, so its lane, and its rank, never ends: where every rank ended, none is)
        blocked = self.blocked() if any(self.finish[r] != self.finish[r] for r in self.ranks) else []
        if self.progress is not None and not blocked and self._told < self._total:
            # tasks of launches timed as a library call (sim/library.py) end with the call, unseen
            self.progress(self.s.variant, self._total, self._total)
        if blocked:
            lines = []
            for run in blocked:
                t, sig = run.member(), signal_of(run.key)
                lines.append(f"rank {t.rank} role {t.role.value} {t.describe()} waits for {sig} >= {run.need}, "
                             f"has {self.board.count(sig)}")
            injected = self.inject.report()
            more = [f"... and {len(lines) - DEADLOCK_LINES} more"] if len(lines) > DEADLOCK_LINES else []
            shown = lines[:DEADLOCK_LINES] + more
            raise DeadlockError(f"deadlock at t={self.env.now:.3f} us in epoch {self.board.epoch}: "
                                f"{len(lines)} tasks wait on signals nothing will bump"
                                + (f" ({injected})" if injected else "") + ":\n  " + "\n  ".join(shown))
        self.tracker.finish()

    def blocked(self) -> list[Run]:
        """The runs waiting on the board, in the order they (last) began to wait. Read from the board's
        waiters when asked (when the run ends, for its deadlock report): a registry kept beside them
        cost a dict store and removal for each of the 164k waits of the 2 x 8 every-node run."""
        waiting = [run for cell in self.board.cells.values() if cell.waiters for _, run in cell.waiters]
        return sorted(waiting, key=attrgetter("seq"))

    def close(self) -> None:
        """Drop everything the run built, once its figures are read. Its parts point back at the
        model (the network, the library calls, the SMs' callbacks), so the whole run would otherwise
        be cyclic garbage: freed only by a full collection, after scanning every object of it."""
        del (self.s, self.c, self.data, self.flows, self.tracker, self.log, self.inject, self.nv_out, self.nv_in,
             self.net, self.library, self.pools, self.proxy_spans, self.queues, self._gemm_cache, self.played,
             self._nv_plans, self.nv_shapes, self._nv_entries, self.progress, self.stress_rng, self.itemsize, self.env,
             self.board, self.spans, self.controller, self._shapes)

    def deadline_status(self) -> str:
        """What this run was doing when a deadline stopped it (:func:`mkernel.limits.bounded`)."""
        running = [r for r in self.ranks if self.finish[r] != self.finish[r]]
        shown = ", ".join(map(str, running[:8])) + (f" and {len(running) - 8} more" if len(running) > 8 else "")
        return (f"simulating {self.s.kernel}/{self.s.variant} at simulated t={self.env.now:.1f} us after "
                f"{self.env.events:,} events, ranks still running: {shown or 'none'} of {self.s.world}")

    def _rank(self, rank: int):
        for li, launch in enumerate(self.s.launches):
            if li > 0:
                yield self.c.launch_us
            if launch.library is not None and self.data is None:  # timed as the call (sim/library.py)
                yield from self.library.enter(rank, li, launch.library)
                continue
            if self.c.gpu.fused_call_us:  # entry and exit of the fused kernel, paid once per call
                yield self.c.gpu.fused_call_us
            if tiles.plain(self, rank, li, launch):  # nothing observes it until it ends (sim/tiles.py)
                done = self.env.event()
                self.env.call_at(tiles.launch_end(self, rank, li, launch), done.succeed)
                yield done
                for task in self.queues.get((rank, li, COMPUTE), ()) if not self.quiet else ():
                    self.log.landed_writes(task)  # (nothing could tell when, within the launch)
                continue
            queues = {role: self.queues.get((rank, li, role), []) for role, _ in launch.sms}
            work = (lambda t: cost.sm_work_us(t, self.itemsize, self.c)) if self.controller else None
            pool = RolePool(dict(launch.sms), queues, work)
            self.pools[rank] = pool
            if self.controller is not None:  # the initial split is the controller's too
                self.controller(rank, pool, self.env.now)
            roles = pool.initial_roles()
            lane = Lane(rank, pool, len(roles), self.env.event(), self._due, self._wake)
            if self._one_by_one:
                self._pass(lane, [(slot, role, None, 0) for slot, role in enumerate(roles)])
            else:
                self._bulk(lane, [(role, n, None) for role, n in pool.target.items()])
            yield lane.done
        self.finish[rank] = self.env.now
        self.log.check_outputs_landed(rank, self.env.now)

    # -- runs doing their work -------------------------------------------------------------------
    def _start(self, run: Run) -> None:
        if self.stress > 0:  # a stressed SM starts up to 1+stress us late
            self.env.call_later(self._stretch(1.0), self._stressed, run)
            return
        self._work(run)

    def _stressed(self, run: Run) -> None:
        self._ready(run.lane.rank, run.role, run.task, run.n)
        run.speed = self.speeds[self._computing[run.lane.rank]] if run.task.op is GEMM else 0.0
        self._work(run)

    def _work(self, run: Run) -> None:
        task, op = run.task, run.item.op  # a run's members share shapes, and ranks but for a put's or a copy's
        now = run.start = self.env.now
        if op is PUT:  # one member, numbered as the hazard tracker reports it
            self.env.call_first(self._put, (run, self.tracker.member(task, run.first)))
            return
        if self.quiet:
            pass
        elif run.parts is None:  # (run.entries() of a run of one entry, without building its tuple)
            self.log.check_reads(task, now, run.first, run.n)
        else:
            for entry, first, n in run.parts:
                self.log.check_reads(entry, now, first, n)
        rank = run.lane.rank  # (a member's rank is its entry's, whose queue is its lane's: Schedule.queues)
        slow = self.slow[rank]
        if run.item.nvlink:  # (first: most runs that get here)
            self._nvlink(run, slow)
        elif op is GEMM:
            us = self._gemm_us(task, run.speed if run.speed else self.speeds[self._computing[rank]])
            self._later(self._stretch(us) * slow, Model._worked, run)
        elif op is ATTN:
            self._later(self._stretch(cost.attn_us(task, self.itemsize, self.c)) * slow, Model._worked, run)
        elif op is NORM:
            self._later(cost.local_bytes(task, self.itemsize) / self.sm_stream * slow, Model._worked, run)
        else:
            self._worked([run])

    def _gemm_shape(self, task: Task) -> tuple:
        """What a GEMM tile's cost reads besides its speed: shapes and item sizes (and accumulate)."""
        shape = self._shapes.get(id(task))
        if shape is None:
            a, b = task.reads
            shape = self._shapes[id(task)] = (a.buffer, a.row1 - a.row0, a.col1 - a.col0, b.buffer, b.col1 - b.col0,
                                              task.writes[0].buffer, task.accumulate)
        return shape

    def _gemm_us(self, task: Task, speed: float) -> float:
        key = (self._gemm_shape(task), speed)
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
            if run.role is COMPUTE and tile and run.item.op in TILED:
                self._later(tile, Model._free, run)  # fill, epilogue, task row
            else:
                free.append(run)
        if free:
            self._free(free)

    def _free(self, runs: list[Run]) -> None:
        if self.progress is not None:
            self._ended = ended = self._ended + (runs[0].n if len(runs) == 1 else sum(run.n for run in runs))
            if float(ended - self._told) >= self._every or ended == self._total:  # (float: a typed compare)
                self._told = ended
                self.progress(self.s.variant, ended, self._total)
        if self._one_by_one:
            self._pass(runs[0].lane, [(slot, run.role, run, j) for run in runs for j, slot in enumerate(run.slots)])
        else:
            self._bulk(runs[0].lane, [(run.role, run.n, run) for run in runs])

    def _landed(self, run: Run) -> None:
        if self.quiet:
            return
        if run.parts is None:  # (run.entries() of a run of one entry, without building its tuple)
            self.log.landed_writes(run.task, run.first, run.n)
        else:
            for entry, first, n in run.parts:
                self.log.landed_writes(entry, first, n)
        if self.data is not None:
            for j in range(run.n):
                self.data.apply(run.member(j))

    def _signal(self, run: Run, paid: bool) -> None:
        """Every member's signals: bumped now, or for a flag stored to a peer one NVLink latency on
        (unless the task already waited that latency for its own peer stores). The entries' lists
        of keys bumped once each go in one call (a GEMM run's parts: the same bumps, in order). A run
        that paid the latency (a peer copy's) bumps each entry's keys now, as :func:`flat_keys` lists them."""
        board = self.board
        if paid:
            for task, first, n in run.entries():
                keys, times, repeat = flat_keys(task, first, n)
                board.bump_keys(keys, times, repeat)
            return
        now, later = run_bumps(run.entries(), run.task.rank)
        for keys, times, repeat in now:
            board.bump_keys(keys, times, repeat)
        if later:
            run.later = later
            self._later(self.c.nvlink.latency_us, Model._flags, run)

    def _flags(self, runs: list[Run]) -> None:
        board = self.board
        for run in runs:
            for keys, times, repeat in run.later:
                board.bump_keys(keys, times, repeat)

    def _put(self, state: tuple[Run, Task]) -> None:
        """A put's first step, where a process of it would start (before the instant's other events);
        :meth:`Network.send` schedules the rest, then frees the SM."""
        run, task = state
        sources = self.data.snapshot(task) if self.data is not None else None
        self.net.send(task, sources, partial(self._free, [run]))

    def _nvlink(self, run: Run, slow: float) -> None:
        """Local bytes stream while one weighted flow carries every peer transfer of the members;
        then the fused kernel's load round trips, and its per-task cost. One wake-up at the flow's
        end and one at the run's end: the times of the same steps taken one after the other."""
        task = run.task
        plan = self.nv_shapes.plan(self, task) if self.nv_shapes is not None else None  # (kept by position)
        if plan is None:
            if task.count > 1 and not run.item.joins:  # (never kept by entry: then each run is one member,
                plan = nvplan.shared(self, run.member())  # made for it, with its own ranks)
            else:
                plan = self._nv_entries.get(id(task))  # an entry's plan, found by the entry
                if plan is None:
                    plan = self._nv_entries[id(task)] = nvplan.shared(self, task)
        run.paid, local_us, step_us, flows, merged, rtt = plan
        local_us = local_us * slow  # (an injected slowdown of the rank)
        start = self.env.now
        if flows is None:
            self._until((start + (local_us + step_us)) + merged, Model._copied, run)
            return
        self.flows.transfer_plan(flows, run.n, then=nvplan.Moved(self, run, start + local_us, rtt, merged))

    def _moved(self, run: Run, streamed: float, rtt: float, merged: float) -> None:
        """``run``'s flow has ended; its local bytes have streamed by ``streamed``. The fused kernel's
        steps each wait a peer round trip: latency the port does not see."""
        trip = rtt if self.stress <= 0 else self._stretch(rtt)  # (as _stretch: its draw, at the flow's end)
        self._until((max(self.env.now, streamed) + trip) + merged, Model._copied, run)

    def _copied(self, runs: list[Run]) -> None:
        tail = self.c.gpu.fused_peer_task_us
        if not tail or self.quiet:  # (no run pays the tail later: all are paid now, in order)
            for run in runs:
                self._landed(run)
            self._paid(runs)
            return
        now = []
        for run in runs:
            self._landed(run)
            if run.paid:
                self._later(tail, Model._paid, run)
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

    # -- metrics -------------------------------------------------------------------------------
    def all_links(self) -> list[tuple[int, Link]]:
        """(rank, link) for every modelled link."""
        out = [(r, l) for r, l in enumerate(self.nv_out)] + [(r, l) for r, l in enumerate(self.nv_in)]
        for per, links in ((self.net.nic_out, "out"), (self.net.nic_in, "in")):
            out += [(r, l) for r, ls in enumerate(per) for l in ls]
        return out

