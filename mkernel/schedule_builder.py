"""How a builder makes a :class:`~mkernel.ir.Schedule`: the one mutable object of the IR.

The IR itself (:mod:`mkernel.ir`) is frozen data; a builder collects buffers, launches and tasks
here, in queue order, and freezes them with :meth:`ScheduleBuilder.build`. What the builder adds to
plain appending is the bookkeeping every op needs and none should redo: ids in tuple order, the
bumps each signal has had so far (the count a complete wait expects), grouped or flat tasks, and
the three partial builds (a timing build without library launches' tasks, a build of the first
nodes only, and of their local rank 0 alone).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from .ir import IR_VERSION, Buffer, BufferKind, Launch, Library, Op, Role, Schedule, Signal, Step, Task, new_task
from .signal_table import bump_keys, count_homes
from .slots import settable

_TASK = settable(Task)  # (appender's tasks: filled inline, then made Tasks)


@dataclass
class ScheduleBuilder:
    """Mutable helper that builders use to collect buffers and tasks, then freeze a Schedule.

    ``grouped`` keeps the groups that :meth:`add` is given (``count``, ``step``); without it each is
    added as its members, so a flat build is exactly the expanded grouped one.

    ``library_tasks=False`` makes a timing build: a launch that stands for a library call
    (``Launch.library``) gets no tasks (:meth:`add` drops them; builders skip the loops where
    :meth:`builds` says so), and the schedule lists it in ``Schedule.elided``. A timing run never
    runs those tasks: it times the launch as the call (:mod:`mkernel.sim.library`), which ends
    every task of the launch at once on every rank, so what it needs of them is nothing, as long as
    no task of another launch waits on their signals (validate's rule on every full build). A data
    run executes them, so it needs the full build.

    ``first_nodes`` = n > 0 builds the tasks of nodes 0..n-1 alone, for an op whose every node runs
    the same queues under the node shift (node m -> m - 1; see :mod:`mkernel.sim.collapse`), with n
    dividing the node count. Builders loop over :meth:`ranks` and :meth:`nodes`, :meth:`add` drops
    other ranks' tasks, and :meth:`bumped` counts a signal's bumps as the full schedule would: by
    symmetry, what another node's tasks bump on a built node is what the built nodes' tasks bump on
    other nodes, so bumps are counted folded onto the built ranks (rank mod n x gpus_per_node).

    ``local_fold`` (with ``first_nodes``) builds local rank 0 of each built node alone, for an op
    whose every local rank runs rank 0's queues rotated (local m -> m + l mod G: see
    :mod:`mkernel.sim.localfold`, which checks the same on a built schedule). A bump of a signal on
    another local rank l then names, at its real rank, the signal of rank 0 that plays its part:
    the builder lists in ``rotating`` the signals whose index holds a rank numbered from the
    receiver (``Cluster.relative``), as ``index // unit``, and that rank's local part is rotated
    back by l, and in ``fixed`` those whose index means the same on every rank (they keep it); a
    bump on another local rank of a signal in neither list is refused. Bumps are counted at the
    node's rank 0, so a wait's count is what the full schedule gives it. A group whose renamed
    signals no longer step as its step says is added as its members.
    """

    kernel: str
    variant: str
    world: int
    gpus_per_node: int
    num_sms: int
    buffers: list[Buffer] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)
    tasks: list[Task] = field(default_factory=list)
    bumps: Counter = field(default_factory=Counter)  # (rank, name, index) -> bumps, folded with first_nodes
    scanned: dict = field(default_factory=dict)  # signal name -> the tasks whose bumps of it are in bumps
    first_nodes: int = 0
    grouped: bool = False
    library_tasks: bool = True
    elided: list[int] = field(default_factory=list)  # launches left without tasks (library_tasks=False)
    local_fold: bool = False
    rotating: dict[str, int] = field(default_factory=dict)  # signal name -> unit of its receiver-relative rank
    fixed: tuple[str, ...] = ()  # signals bumped on other local ranks whose index means the same on each

    def __post_init__(self) -> None:
        if self.local_fold and not self.first_nodes:
            raise ValueError("a build of local rank 0 alone (local_fold) is a build of the first nodes too")
        self.local_fold = self.local_fold and self.gpus_per_node > 1
        self._home = count_homes(self.world, self.gpus_per_node, self.first_nodes,
                                 self.gpus_per_node if self.local_fold else 0)
        self._emitted = [self.emits(rank) for rank in range(self.world)]  # (add asks for each task)
        self._building = True  # builds(), kept as launches open
        self._as_given = self.grouped and not self.local_fold  # (add_group: groups kept as they come)

    def emits(self, rank: int) -> bool:
        """Whether tasks of ``rank`` are built."""
        return (not self.first_nodes or rank < self.first_nodes * self.gpus_per_node) and \
            not (self.local_fold and rank % self.gpus_per_node)

    def builds(self) -> bool:
        """Whether the current launch's tasks are built: not in a timing build's library launch."""
        return not self.elided or self.elided[-1] != len(self.launches) - 1

    def ranks(self) -> range:
        """The ranks whose tasks are built."""
        return range(0, self.first_nodes * self.gpus_per_node if self.first_nodes else self.world,
                     self.gpus_per_node if self.local_fold else 1)

    def nodes(self) -> range:
        """The nodes whose tasks are built."""
        return range(self.first_nodes or self.world // self.gpus_per_node)

    def _key(self, rank: int, name: str, index: int) -> tuple[int, str, int]:
        return (self._home[rank] if self._home else rank, name, index)

    def buffer(self, name: str, rows: int, cols: int, dtype: str = "bf16",
               kind: BufferKind = BufferKind.SCRATCH, writes_per_element: int = 1) -> str:
        self.buffers.append(Buffer(name, rows, cols, dtype, kind, writes_per_element))
        return name

    def launch(self, name: str, sms: dict[Role, int], library: Library | None = None) -> int:
        """Open a new launch; later tasks belong to it. Returns its index."""
        self.launches.append(Launch(name, tuple((r, n) for r, n in sms.items() if n > 0), library))
        if library is not None and not self.library_tasks:
            self.elided.append(len(self.launches) - 1)
        self._building = self.builds()
        return len(self.launches) - 1

    def add(self, rank: int, role: Role, op: Op, *, reads=(), writes=(), accumulate: bool = False,
            waits=(), signals=(), chunk: int = -1, label: str = "", mask: tuple[int, ...] = (),
            index: tuple[int, ...] = (), count: int = 1, step: Step | None = None) -> Task | None:
        """Add a task, or with ``count`` > 1 a group of members differing by ``step`` (its label's
        "{}" takes each member's number); returns it (member 0 of a flat build), or None for a rank
        or a launch not built."""
        if not self._emitted[rank] or not self._building:
            return None
        if count != 1:
            if count < 1 or step is None:
                raise ValueError(f"a group of {count} members needs a step")
        elif step is not None:  # a group of one: a plain task
            label, step = label.replace("{}", str(step.label[0])), None
        task = new_task(len(self.tasks), rank, role, op, tuple(reads), tuple(writes), accumulate,
                        tuple(waits), tuple(signals), len(self.launches) - 1, chunk, label,
                        tuple(mask) if mask else (), tuple(index) if index else (), count, step)
        if self.local_fold and signals:
            self._declared(task)
            task = self._renamed(task)
            if isinstance(task, list):  # renamed member by member: added as its members
                self.tasks += task
                return task[0]
        if count > 1 and not self.grouped:
            members = task.members()
            self.tasks += members
            return members[0]
        self.tasks.append(task)
        return task

    def add_group(self, rank: int, role: Role, op: Op, reads: tuple, writes: tuple, waits: tuple, signals: tuple,
                  label: str, count: int, step: Step) -> None:
        """:meth:`add` of a task with no chunk, mask or index, its fields given as tuples, for hot loops
        (the hottest, of one kind of task each, take an :meth:`appender`): a group of several members
        that a grouped build keeps as it comes (nothing to rename, nothing to expand) is appended
        here, without add's keywords, conversions and checks; anything else goes through add."""
        if count > 1 and self._as_given and self._building and self._emitted[rank] and step is not None:
            self.tasks.append(new_task(len(self.tasks), rank, role, op, reads, writes, False, waits, signals,
                                       len(self.launches) - 1, -1, label, (), (), count, step))
        else:
            self.add(rank, role, op, reads=reads, writes=writes, waits=waits, signals=signals, label=label,
                     count=count, step=step)

    def appender(self, rank: int, role: Role, op: Op, label: str) -> Callable[..., None]:
        """:meth:`add_group` for one rank, role, op and label, in the launch open now, as a function of
        the rest (reads, writes, waits, signals, count, step). Why: the 2 x 8 GEMM+AR 32768^2 build's
        49k sums and broadcasts each paid for add_group's bound call and its checks, which are the
        same for every task of a rank; where they pass (a grouped build keeping the rank's groups as
        they come), a group of several members is appended here, and anything else goes through
        add_group. Made in one launch, it hands every call after the next launch opens to add_group."""
        tasks, append, add_group, launches = self.tasks, self.tasks.append, self.add_group, self.launches
        launch = len(launches) - 1
        if not (self._as_given and self._building and self._emitted[rank]):
            def each_through_add_group(reads: tuple, writes: tuple, waits: tuple, signals: tuple, count: int,
                                       step: Step) -> None:
                add_group(rank, role, op, reads, writes, waits, signals, label, count, step)
            return each_through_add_group

        def add(reads: tuple, writes: tuple, waits: tuple, signals: tuple, count: int, step: Step) -> None:
            if count > 1 and step is not None and len(launches) - 1 == launch:
                task = _TASK()  # (made inline, as new_task makes it, 3 fields a line: more build a tuple)
                task.id, task.rank, task.role = len(tasks), rank, role
                task.op, task.reads, task.writes = op, reads, writes
                task.accumulate, task.waits, task.signals = False, waits, signals
                task.launch, task.chunk, task.label = launch, -1, label
                task.mask, task.index, task.count = (), (), count
                task.step = step
                task.__class__ = Task
                append(task)
            else:
                add_group(rank, role, op, reads, writes, waits, signals, label, count, step)
        return add

    def _declared(self, task: Task) -> None:
        """Refuse a bump on another local rank of a signal the builder has not said how to rename
        (``rotating``: its index holds a receiver-relative rank; ``fixed``: it means the same on
        every rank): a local build would otherwise name it wrongly, silently."""
        g, st = self.gpus_per_node, task.step if task.count > 1 else None
        for k, sig in enumerate(task.signals):
            moves = st is not None and any(s[k][0] for s in (st.signals, st.outer) if s)  # its rank steps
            if (sig.rank % g or moves) and sig.name not in self.rotating and sig.name not in self.fixed:
                raise ValueError(f"{task.describe()} bumps {sig.name} on another local rank, and the builder "
                                 f"declares it neither rotating nor fixed: a build of local rank 0 cannot rename it")

    def _image(self, name: str, rank: int, index: int) -> int:
        """The index, on local rank 0, of the signal ``name[index]`` plays on ``rank`` (``local_fold``)."""
        g = self.gpus_per_node
        unit, local = self.rotating.get(name), rank % g
        if unit is None or not local:
            return index
        q, rest = divmod(index, unit)
        return (q - q % g + (q % g - local) % g) * unit + rest

    def _images(self, task: Task) -> list[list[int]]:
        """Every member's renamed signal indices (:meth:`_image`), made without its signals."""
        st, n, image = task.step, task.count, self._image
        p = st.period or n
        outer = st.outer or ((0, 0),) * len(task.signals)
        cols = [[image(sig.name, sig.rank + i % p * dk + i // p * ok, sig.index + i % p * dx + i // p * ox)
                 for i in range(n)] for sig, (dk, dx), (ok, ox) in zip(task.signals, st.signals, outer)]
        return [list(x) for x in zip(*cols)]

    def _renamed(self, task: Task) -> list[Task] | Task:
        """``task`` with its signals renamed (:meth:`_image`), as one group where the renamed indices
        still step as the group's step says (evenly, or cycling with its period), else its members."""
        if not any(g.name in self.rotating for g in task.signals):
            return task
        n, st = task.count, task.step
        if n > 1 and st.signals and st.rotate:  # a wrapped group: its members, each renamed (ids go on from the task's)
            return [self._renamed(m) for m in task.members()]
        images = self._images(task) if n > 1 and st.signals else [[self._image(g.name, g.rank, g.index)
                                                                   for g in task.signals]]
        first = images[0]
        signals = tuple(Signal(g.rank, g.name, x) for g, x in zip(task.signals, first))
        if n == 1 or not st.signals:
            return Task(task.id, task.rank, task.role, task.op, task.reads, task.writes, task.accumulate, task.waits,
                        signals, task.launch, task.chunk, task.label, task.mask, task.index, n, st)
        p = st.period
        inner = [b - a for a, b in zip(first, images[1])] if not p or p > 1 else [0] * len(first)
        outer = [b - a for a, b in zip(first, images[p])] if p and n > p else [0] * len(first)
        if any(x != x0 + (i % p) * d + (i // p) * o if p else x != x0 + i * d
                            for i, image in enumerate(images) for x, x0, d, o in zip(image, first, inner, outer)):
            return [self._renamed(m) for m in task.members()]  # (ids go on from the task's)
        step = Step(st.regions, tuple((s[0], d) for s, d in zip(st.signals, inner)), st.waits, st.chunk, st.label, p,
                    tuple((s[0], o) for s, o in zip(st.outer, outer)) if p else ())
        return Task(task.id, task.rank, task.role, task.op, task.reads, task.writes, task.accumulate, task.waits,
                    signals, task.launch, task.chunk, task.label, task.mask, task.index, n, step)

    def bumped(self, signal: Signal) -> int:
        """How many tasks added so far bump ``signal``: the count a complete wait on it expects.

        A name's bumps are counted when first asked, and then only those of the tasks added since:
        builders ask about a few names (a drain's), and counting every task's bumps as it was added
        cost a fifth of a large build."""
        name, tasks, home, bumps = signal.name, self.tasks, self._home, self.bumps
        alike: dict[int, list] = {}  # id of a signals tuple -> [it, bumps by the tasks whose signals of
        # the name do not step]
        last, entry = None, None  # (the last tuple counted there, and its entry)
        alone, held = None, 0  # (the signal of the last tuples of one or two, and their bumps of it not yet counted)

        def count(g: Signal, n: int) -> None:  # n bumps of g (a signal of the name)
            key = (home[g.rank] if home else g.rank, name, g.index)
            bumps[key] = bumps.get(key, 0) + n  # (not +=: a Counter's missing key is a Python call)

        for task in tasks[self.scanned.get(name, 0):]:  # (a slice: islice would step over the tasks before)
            sigs, k = task.signals, 0
            for g in sigs:
                if g.name == name:  # (the first of the name, at k: the last too in most groups, so
                    # whether it steps is told here; _steps, a call, is asked only about the rest)
                    st = task.step
                    if task.count > 1 and st.signals and (
                            any(st.signals[k]) or st.period and (k >= len(st.outer) or any(st.outer[k]))
                            or k < len(sigs) - 1 and self._steps(task, name)):
                        fixed, moving = bump_keys(task, home=home)
                        for key, times in fixed:
                            if key[1] == name:
                                bumps[key] = bumps.get(key, 0) + times  # (not +=: a Counter's missing
                                # key is a Python call)
                        bumps.update(key for key in moving if key[1] == name)
                    elif len(sigs) < 3:  # each of them bumped count times (bump_keys' first case): a tuple
                        # of one or two is rarely shared (a 2 x 8 GEMM+AR 32768^2 build's sums each have their
                        # own), but its signal of the name often is (there, each rank's sums bump its one
                        # out_done): counted by that signal, met again and again with no other between
                        n = task.count
                        if g is alone:
                            held += n
                        else:
                            if alone is not None:
                                count(alone, held)
                            alone, held = g, n
                        if k == 0 and len(sigs) == 2 and sigs[1].name == name:  # (the second, too, may be of it)
                            count(sigs[1], n)
                    elif sigs is last:  # the same, counted once per tuple (a 2 x 8 GEMM+AR 32768^2 build's
                        # drain took 0.1 s making its broadcasts' keys: one tuple of G - 1 signals for each
                        # rank's, met again and again with no other tuple of the name between)
                        entry[1] += task.count
                    else:
                        last, entry = sigs, alike.get(id(sigs))
                        if entry is None:
                            entry = alike[id(sigs)] = [sigs, task.count]
                        else:
                            entry[1] += task.count
                    break
                k += 1
        if alone is not None:
            count(alone, held)
        for signals, n in alike.values():
            for g in signals:
                if g.name == name:
                    count(g, n)
        self.scanned[name] = len(tasks)
        return bumps[self._key(signal.rank, name, signal.index)]

    @staticmethod
    def _steps(task: Task, name: str) -> bool:
        """Whether a signal of ``name`` steps among the group's members (:func:`bump_keys`' rule)."""
        st = task.step
        for k, g in enumerate(task.signals):  # (a loop, not any() of a generator: asked of ~16k groups in a drain)
            if g.name == name and (any(st.signals[k]) or st.period and (k >= len(st.outer) or any(st.outer[k]))):
                return True
        return False

    def build(self, flops_per_gpu: float) -> Schedule:
        return Schedule(IR_VERSION, self.kernel, self.variant, self.world, self.gpus_per_node,
                        self.num_sms, tuple(self.buffers), tuple(self.launches), tuple(self.tasks),
                        flops_per_gpu, self.first_nodes, tuple(self.elided),
                        self.gpus_per_node if self.local_fold else 0)

