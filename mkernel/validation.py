"""Static checks of a Schedule, run before any backend touches it.

Each rule raises :class:`ScheduleError` naming the task (or buffer) and the rule broken:

- operand arity and shapes per op; regions inside their buffer and rank range;
- a task whose role has no SMs in its launch;
- locality: waits poll the task's own rank; GEMMs touch only local memory; NVLink ops stay in the
  node; a PUT reads locally and writes to another node;
- no task writes an INPUT buffer;
- a wait that nothing signals, or a count its signal can never reach;
- a dependency cycle (signal edges plus launch order on each rank);
- an OUTPUT element not written exactly ``writes_per_element`` times;
- a race: two conflicting accesses that no chain of waits orders (see :mod:`mkernel.races`).

A group (``Task.count`` > 1) must carry a step that fits it, and its members keep the per-task
rules. The rules over pairs of tasks look at groups without making their members where they can:
cycles on the graph of groups (expanded only to name a cycle found there), output coverage on
arrays of member regions (:mod:`mkernel.coverage`); the race check runs on the expanded schedule,
and only on one of at most ``RACE_CHECK_MAX_TASKS`` members.

A schedule of the first nodes alone (``Schedule.first_nodes``, and of their local rank 0 alone,
``Schedule.local_fold``) gets the per-task rules and the signal counts, folded onto those nodes
(and that rank) as the builder counted them; cycles, output coverage and races need every node's
tasks, so they are checked on full builds of the same op (tests/core/test_symmetry.py proves the two
builds simulate alike).

A timing build (``Schedule.elided``: library launches left without their tasks, see
:class:`~mkernel.schedule_builder.ScheduleBuilder`) gets every rule on the tasks it has but output coverage, since
the outputs a left-out call writes are not there to count; the full build of the same op keeps the
rule, and tests/sim/test_timing_build.py proves a timing build is the full build less exactly those
launches' tasks. What makes leaving them out exact is checked on every build that has them: no task
of another launch waits on a signal that a library launch's task bumps (a timing run ends such a
launch as one call, and later launches start after it on every rank).
"""
from __future__ import annotations

from itertools import chain
from operator import attrgetter

import numpy as np

from .coverage import check_outputs
from .errors import ScheduleError
from .ir import BufferKind, Op, Schedule, Task, expand, paused_gc
from .members import Entries, RegionTable, region_table
from .races import RACE_CHECK_MAX_TASKS, acyclic, check_races, happens_before_graph, topological_order
from .screen import cleared
from .signal_table import SignalTable, count_homes, signal_table


@paused_gc()
def validate(s: Schedule, races: bool = True) -> RegionTable | None:
    """Check every rule (the race check only with ``races``); raise on the first broken one. Returns
    the region table read on the way (:func:`mkernel.members.read_regions`), for a backend that reads
    it too: None where a group's steps do not fit it, which a rule then names."""
    buffers = {b.name: b for b in s.buffers}
    if len(buffers) != len(s.buffers):
        raise ScheduleError(f"schedule {s.kernel}/{s.variant}: duplicate buffer names")
    for launch in s.launches:
        total = sum(n for _, n in launch.sms)
        if total > s.num_sms:
            raise ScheduleError(f"launch '{launch.name}' asks for {total} SMs, the GPU has {s.num_sms}")
    for li in s.elided:
        if not (0 <= li < len(s.launches) and s.launches[li].library is not None):
            raise ScheduleError(f"schedule {s.kernel}/{s.variant}: launch {li} is listed as a library call whose "
                                f"tasks were left out, but it is no library launch")
    rules = _TaskRules(s, buffers)
    home = _homes(s)
    entries = Entries(s.tasks)  # (read once: the tables below read it)
    try:
        table, keys = region_table(s, entries), signal_table(s, home, entries)  # (made once: the screen and the
        plain = cleared(s, table, keys, entries)  # rules below read them)
    except (ValueError, IndexError):  # a group's steps do not fit it, or a put signals a rank past the world:
        table, keys, plain = None, None, np.zeros(len(s.tasks), bool)  # the rules below name it (or fail there)
    for i in np.flatnonzero(~plain).tolist():  # (a cleared entry keeps every per-task rule: mkernel/screen.py)
        task = s.tasks[i]
        if task.id != i:
            raise ScheduleError(f"{task.describe()} sits at position {i}; ids must equal positions")
        if task.count == 1:
            rules.check(task)
        else:
            _check_group(rules, task)
    keys = keys or signal_table(s, home, entries)
    # (read once for the two rules below; past the per-task rules every entry's launch is one of the
    # schedule's, so with one launch every entry's is 0, and ranks matter to those rules only for launch order)
    placed = _placed(s) if len(s.launches) > 1 else (np.zeros(len(s.tasks), np.int64), np.zeros(len(s.tasks), np.int64))
    _check_signals(s, keys, placed[1])
    if s.first_nodes:
        return table
    _check_cycles(s, keys, placed)
    if not s.elided:
        check_outputs(s, buffers, table, keys.count)
    if races and int(keys.count.sum()) <= RACE_CHECK_MAX_TASKS:
        check_races(expand(s))  # pairs of members: the one rule that makes them (on small schedules only)
    return table


def _check_group(rules: _TaskRules, task: Task) -> None:
    """A group's step fits its task, and its members keep every per-task rule: regions move evenly,
    so the first and last member bound the rest, unless ranks step (then every member is checked)."""
    st = task.step
    if task.count < 2 or st is None:
        _fail(task, f"a group of {task.count} members needs count >= 2 and a step")
    for name, have, want in (("regions", st.regions, len(task.reads + task.writes)),
                             ("signals", st.signals, len(task.signals)), ("waits", st.waits, len(task.waits))):
        if have and len(have) != want:
            _fail(task, f"its step has {len(have)} {name} steps for {want} {name}")
    if "{}" not in task.label and st.label[1]:
        _fail(task, f"its step numbers the label, but the label {task.label!r} has no {{}} for the number")
    if st.period and (st.period < 1 or len(st.outer) != len(st.signals) or not st.signals):
        _fail(task, f"its signals cycle every {st.period} members, so each signal needs a step and an outer step")
    rot, cycle = st.rotate, st.period or task.count  # (members wrap within each cycle)
    if rot and (any(st.waits) or st.chunk or not 0 < rot < cycle or task.count % cycle):
        _fail(task, f"its members wrap within each cycle of {cycle} by rotate {rot}, so 0 < rotate < "
                    f"{cycle}, the cycles are whole, and its waits and chunk may not step")
    # a rule on ranks holds for every member if it holds for the extreme ones (the first and last, or
    # those either side of the wrap: the least step, -r, and the most, count - r - 1), ranks moving
    # evenly and nodes being ranges of ranks; but "a put writes to another node" could skip over the own node
    every = task.op is Op.PUT and any(r[0] for r in st.regions)
    last = task.count - 1
    ends = (last,) if not rot else tuple(sorted({i for i in (cycle - rot, last - rot) if i}))
    rules.check(task)  # member 0's fields are the task's
    if not (st.regions or st.signals):
        return  # every member touches member 0's regions and signals (waits step by index only)
    if not (every or any(r[0] for r in st.regions) or any(g[0] for g in st.signals + st.outer)):
        # only rows, columns and signal indices move: buffers, ranks (so locality) stay member 0's,
        # and what the extreme members could break is a region's bounds
        for i in ends:
            if not rules.inside(task, i):
                rules.check(task, i)  # (raises, naming the member and the region)
        return
    p = st.period
    # cycling signals: ranks are affine in (i mod p, i div p), so they are extreme at the corners of
    # the members' staircase (the first cycle's last, the last cycle's first and last, the one before);
    # wrapped (whole cycles), affine in the step within the cycle (-r .. p - r - 1) and the cycle: the
    # members either side of the wrap in the first and the last cycle
    if not p:
        corners = ends
    elif rot:
        corners = sorted({i for i in (p - rot - 1, p - rot, last - rot, last - rot + 1) if 0 < i})
    else:
        corners = sorted({i for i in (p - 1, last // p * p - 1, last // p * p, last) if 0 < i})
    for i in range(1, task.count) if every else corners:
        rules.check(task, i)  # shapes, ranks and launches do not step: what moves is checked


def _fail(task: Task | _Member, rule: str) -> None:
    raise ScheduleError(f"{task.describe()}: {rule}")


class _Member:
    """Member ``i`` of a group, for an error message only (built when one is raised)."""

    __slots__ = ("task", "i")

    def __init__(self, task: Task, i: int) -> None:
        self.task, self.i = task, i

    def describe(self) -> str:
        return self.task.member(self.i).describe()


class _TaskRules:
    """The per-task rules, with what they read of the schedule looked up once (they run on every
    task of schedules of up to millions)."""

    def __init__(self, s: Schedule, buffers: dict) -> None:
        self.world, self.gpus = s.world, s.gpus_per_node
        self.launches = s.launches
        self.budgets = [dict(launch.sms) for launch in s.launches]
        self.buffers = buffers
        self.inputs = {b.name for b in s.buffers if b.kind is BufferKind.INPUT}
        self.elided = set(s.elided)

    def inside(self, task: Task, member: int) -> bool:
        """Whether member ``member``'s regions, moved by rows and columns alone (ranks do not
        step), stay inside their buffers: :meth:`check`'s bounds rule without making the regions."""
        buffers, o = self.buffers, task.offset(member)
        for r, (_, dr, dc) in zip(task.reads + task.writes, task.step.regions):
            if dr or dc:
                buf = buffers[r.buffer]
                dr, dc = o * dr, o * dc
                if not (0 <= r.row0 + dr < r.row1 + dr <= buf.rows and 0 <= r.col0 + dc < r.col1 + dc <= buf.cols):
                    return False
        return True

    def check(self, task: Task, member: int = 0) -> None:
        """Every per-task rule on ``task``, or on the regions and signals of its member ``member``
        (> 0: the rules that member's stepped fields could break; its error names the member)."""
        if member:
            regions, signals = task.moved(member)
            at = _Member(task, member)
        else:
            regions, signals, at = task.reads + task.writes, task.signals, task
            if not 0 <= task.rank < self.world:
                _fail(at, f"rank outside 0..{self.world - 1}")
            if not 0 <= task.launch < len(self.launches):
                _fail(at, f"launch {task.launch} does not exist")
            if task.launch in self.elided:
                _fail(at, f"it sits in launch {task.launch}, whose tasks this timing build leaves out")
            if self.budgets[task.launch].get(task.role, 0) <= 0:
                _fail(at, f"role {task.role.value} has no SMs in launch '{self.launches[task.launch].name}'")
        world = self.world
        for r in regions:
            buf = self.buffers.get(r.buffer)
            if buf is None:
                _fail(at, f"touches unknown buffer {r.buffer!r}")
            if not 0 <= r.rank < world:
                _fail(at, f"region {r} names a rank outside 0..{world - 1}")
            if not (0 <= r.row0 < r.row1 <= buf.rows and 0 <= r.col0 < r.col1 <= buf.cols):
                _fail(at, f"region {r} is empty or outside buffer {buf.name} ({buf.rows}x{buf.cols})")
        for r in regions[len(task.reads):]:
            if r.buffer in self.inputs:
                _fail(at, f"writes input buffer {r}")
        if not member:
            _check_arity(task)
        _check_locality(self.gpus, task.rank, at, task.op, regions[:len(task.reads)], regions[len(task.reads):],
                        signals)
        if member:
            return
        for wait in task.waits:
            if wait.signal.rank != task.rank:
                _fail(task, f"waits on {wait.signal}, which lives on another rank; waits poll local memory")
            if wait.count < 1:
                _fail(task, f"waits on {wait.signal} for count {wait.count}; counts start at 1")


def _check_arity(task: Task) -> None:
    reads, writes = task.reads, task.writes
    if task.mask and task.op is not Op.ATTN:
        _fail(task, f"has a causal mask {task.mask}; only an attn takes one")
    if task.index and task.op is not Op.GATHER:
        _fail(task, f"has a gather index of {len(task.index)} rows; only a gather takes one")
    if task.op is Op.GEMM:
        if len(reads) != 2 or len(writes) != 1:
            _fail(task, "a gemm reads (A, B) and writes (C,)")
        (m, k), (k2, n), (m2, n2) = reads[0].shape, reads[1].shape, writes[0].shape
        if k != k2 or (m, n) != (m2, n2):
            _fail(task, f"gemm shapes do not chain: {m}x{k} @ {k2}x{n} -> {m2}x{n2}")
    elif task.op in (Op.COPY, Op.PUT):
        if not reads or len(reads) != len(writes):
            _fail(task, f"a {task.op.value} pairs n >= 1 reads with n writes")
        for src, dst in zip(reads, writes):
            if src.shape != dst.shape:
                _fail(task, f"{task.op.value} {src} -> {dst} changes shape")
    elif task.op is Op.ATTN:
        if len(reads) != 3 or len(writes) != 2:
            _fail(task, "an attn reads (q, k, v) and writes (acc, stats)")
        (q, d), (kr, d2), (vr, d3), acc, stats = (r.shape for r in reads + writes)
        if not (d == d2 == d3 and kr == vr and acc == (q, d) and stats == (q, 2)):
            _fail(task, f"attn shapes do not fit: q {q}x{d}, k {kr}x{d2}, v {vr}x{d3} -> acc {acc}, stats {stats}")
        if task.mask and (len(task.mask) != 2 or task.mask[1] > task.mask[0]):
            _fail(task, f"attn mask {task.mask} must be (q0, k0) with k0 <= q0, so every query sees a key")
    elif task.op is Op.NORM:
        if len(reads) != 2 or len(writes) != 2:
            _fail(task, "a norm reads (acc, stats) and writes (out, lse)")
        (q, d), stats, out, lse = (r.shape for r in reads + writes)
        if not (stats == (q, 2) and out == (q, d) and lse == (q, 1)):
            _fail(task, f"norm shapes do not fit: acc {q}x{d}, stats {stats} -> out {out}, lse {lse}")
    elif task.op is Op.GATHER:
        if len(reads) != 1 or len(writes) != 1:
            _fail(task, "a gather reads one region and writes one")
        (src_rows, src_cols), (dst_rows, dst_cols) = reads[0].shape, writes[0].shape
        if src_cols != dst_cols or len(task.index) != dst_rows:
            _fail(task, f"gather of {len(task.index)} rows from {src_rows}x{src_cols} into {dst_rows}x{dst_cols}: "
                        f"columns must match and the index must name one row per written row")
        if task.index and (min(task.index) < 0 or max(task.index) >= src_rows):  # (MoE: millions of rows)
            _fail(task, f"gather index names a row outside 0..{src_rows - 1}")
    elif task.op is Op.REDUCE:
        if not reads or len(writes) != 1:
            _fail(task, "a reduce reads n >= 1 regions and writes one")
        if any(r.shape != writes[0].shape for r in reads):
            _fail(task, f"reduce operands differ in shape from {writes[0]}")
    elif reads or writes:
        _fail(task, "a nop touches no memory")


def _check_locality(gpus: int, rank: int, task, op: Op, reads: tuple, writes: tuple, signals: tuple) -> None:
    """Where a task on ``rank`` may reach with these regions and signals (``task`` names it in the error)."""
    node = rank // gpus
    if op in (Op.GEMM, Op.ATTN, Op.NORM) and any(r.rank != rank for r in reads + writes):
        _fail(task, f"a {op.value} reads and writes only its own rank's memory")
    if op in (Op.COPY, Op.REDUCE, Op.GATHER) and any(r.rank // gpus != node for r in reads + writes):
        _fail(task, "peer loads and stores reach only ranks of the same node")
    if op is Op.PUT:
        if any(r.rank != rank for r in reads):
            _fail(task, "a put sends only its own rank's memory")
        if any(w.rank // gpus == node for w in writes):
            _fail(task, "a put writes to a rank of another node")
        if len({w.rank for w in writes}) != 1:
            _fail(task, "a put is one message to one destination rank")
    elif any(sig.rank // gpus != node for sig in signals):
        sig = next(sig for sig in signals if sig.rank // gpus != node)
        _fail(task, f"signals {sig} across nodes; only a put's arrival may do that")


def _homes(s: Schedule) -> list[int] | None:
    """Where ``s`` counts each rank's bumps (:func:`mkernel.signal_table.count_homes`; None: at its own)."""
    return count_homes(s.world, s.gpus_per_node, s.first_nodes, s.local_fold)


def _placed(s: Schedule) -> tuple[np.ndarray, np.ndarray]:
    """Each entry's rank and launch."""
    n = len(s.tasks)
    rank, launch = np.fromiter(chain.from_iterable(map(attrgetter("rank", "launch"), s.tasks)), np.int64,
                               2 * n).reshape(-1, 2).T
    return rank, launch


def _check_signals(s: Schedule, keys: SignalTable, launch: np.ndarray | None = None) -> None:
    """Every wait's signal is bumped at least its count times; and no task outside a library launch
    waits on a signal that a library launch's task bumps (what a timing build relies on). ``keys``:
    every member's bumps and waits, counted where ``s`` counts them; ``launch``: each entry's (read
    here if not given). The first wait broken (by entry, wait, member) is named."""
    library = np.array([one.library is not None for one in s.launches], bool)
    bumps = keys.bumps()
    have = bumps[keys.wait_key]
    bad = (have == 0) | (have < keys.wait_count)
    if library.any():  # (else no task is in a library launch)
        launch = _placed(s)[1] if launch is None else launch
        by_library = np.zeros(keys.keys, bool)
        by_library[keys.bump_key[library[launch[keys.bump_entry]]]] = True
        bad |= by_library[keys.wait_key] & ~library[launch[keys.wait_entry]]
    if not bad.any():
        return
    at = int(np.argmax(bad))
    task, have = s.tasks[keys.wait_entry[at]], int(have[at])
    member = task.member(int(keys.wait_member[at]))
    wait = member.waits[keys.wait_j[at]]
    sig = wait.signal
    _fail(member, f"waits on {sig}, which no task signals" if have == 0 else
          f"waits for {sig} >= {wait.count}, but only {have} tasks bump it" if have < wait.count else
          f"waits on {sig}, which a library launch's task bumps: a timing run ends that launch as "
          f"one call and leaves its tasks out, so only launch order may order what follows it")


def _check_cycles(s: Schedule, keys: SignalTable, placed: tuple[np.ndarray, np.ndarray] | None = None) -> None:
    """No dependency cycle over signal edges and per-rank launch order.

    Decided on arrays (:func:`~mkernel.races.acyclic`): each task is a node, and so is each signal
    key (every bumper before it, every waiter after it: a path through a key is an edge of the
    happens-before graph, so the two have the same cycles) and each (rank, launch > 0) (launch
    order: every task of the launch after it, every task of the launch before before it), so the
    graph stays linear in the number of tasks. A grouped schedule is one node per group (each
    depends on every bumper of every member's waits): a cycle among members is one among groups.
    Where there is a cycle, :func:`_name_cycle` names it. ``placed``: :func:`_placed` of ``s``, where read already."""
    n = len(s.tasks)
    rank, launch = placed or _placed(s)
    width = int(launch.max(initial=0)) + 2
    barriers, at = np.unique(np.where(launch > 0, rank * width + launch, -1), return_inverse=True)
    at -= 1 if len(barriers) and barriers[0] == -1 else 0  # (tasks of launch 0 have none)
    barriers = barriers[barriers >= 0]
    tasks = np.arange(n)
    after = np.searchsorted(barriers, rank * width + launch + 1)  # the next launch's barrier, where there is one
    follows = after < len(barriers)
    follows[follows] = barriers[after[follows]] == (rank * width + launch + 1)[follows]
    key = np.int64(n + len(barriers))  # (the tables' entries and keys may be 32-bit: the node numbers are 64-bit)
    # a bump's edge can be on a cycle only where its task has a predecessor (a wait, or a launch before its
    # own) and its key a waiter: the others are left out (exact: a node with no edge in, or none out, is on no
    # cycle), so the graph is not listed with them (a 2 x 8 GEMM+AR 32768^2 build: its GEMM tiles' 524k bumps)
    live = np.zeros(n, bool)
    live[keys.wait_entry] = True
    live[launch > 0] = True
    waited = np.zeros(keys.keys, bool)
    waited[keys.wait_key] = True
    kept = np.flatnonzero(live[keys.bump_entry] & waited[keys.bump_key])
    src = np.concatenate((n + at[launch > 0], tasks[follows], keys.bump_entry[kept], key + keys.wait_key))
    dst = np.concatenate((tasks[launch > 0], n + after[follows], key + keys.bump_key[kept], keys.wait_entry))
    if not acyclic(src, dst, key + keys.keys):
        _name_cycle(s)


def _name_cycle(s: Schedule) -> None:
    """Kahn's algorithm over the happens-before graph (:func:`~mkernel.races.happens_before_graph`,
    with launch order through one barrier node per (rank, launch > 0)); name one cycle if any.

    A grouped schedule is checked on its groups first, and expanded only where they have a cycle,
    so a cycle is named by its members as on the flat schedule, and one that only groups make
    raises nothing.
    """
    n = len(s.tasks)
    preds = happens_before_graph(s, every_signaler=True)
    order = topological_order(preds)
    if len(order) == len(preds):
        return  # (on groups: then their members have no cycle either)
    if n < sum(t.count for t in s.tasks):
        flat = expand(s)  # a cycle among groups may be none among members: the exact check decides
        _check_cycles(flat, signal_table(flat))
        return
    stuck = set(range(len(preds))) - set(order)
    path, at = [], next(t for t in stuck if t < n)
    while at not in path:  # walk predecessors inside the stuck set until one repeats
        path.append(at)
        at = next(p for p in preds[at] if p in stuck)
    cycle = [t for t in path[path.index(at):][::-1] if t < n]
    names = " -> ".join(s.tasks[t].describe() for t in cycle + [cycle[0]])
    raise ScheduleError(f"dependency cycle: {names}")
