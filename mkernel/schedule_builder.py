"""How a builder makes a :class:`~mkernel.ir.Schedule`: the one mutable object of the IR.

The IR itself (:mod:`mkernel.ir`) is frozen data; a builder collects buffers, launches and tasks
here, in queue order, and freezes them with :meth:`ScheduleBuilder.build`. What the builder adds to
plain appending is the bookkeeping every op needs and none should redo: ids in tuple order, the
bumps each signal has had so far (the count a complete wait expects), grouped or flat tasks, and
the two partial builds (a timing build without library launches' tasks, a build of the first
nodes only).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .ir import IR_VERSION, Buffer, BufferKind, Launch, Library, Op, Role, Schedule, Signal, Step, Task, bump_keys


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
    first_nodes: int = 0
    grouped: bool = False
    library_tasks: bool = True
    elided: list[int] = field(default_factory=list)  # launches left without tasks (library_tasks=False)

    def emits(self, rank: int) -> bool:
        """Whether tasks of ``rank`` are built."""
        return not self.first_nodes or rank < self.first_nodes * self.gpus_per_node

    def builds(self) -> bool:
        """Whether the current launch's tasks are built: not in a timing build's library launch."""
        return not self.elided or self.elided[-1] != len(self.launches) - 1

    def ranks(self) -> range:
        """The ranks whose tasks are built."""
        return range(self.first_nodes * self.gpus_per_node if self.first_nodes else self.world)

    def nodes(self) -> range:
        """The nodes whose tasks are built."""
        return range(self.first_nodes or self.world // self.gpus_per_node)

    def _key(self, rank: int, name: str, index: int) -> tuple[int, str, int]:
        return (rank % (self.first_nodes * self.gpus_per_node) if self.first_nodes else rank, name, index)

    def buffer(self, name: str, rows: int, cols: int, dtype: str = "bf16",
               kind: BufferKind = BufferKind.SCRATCH, writes_per_element: int = 1) -> str:
        self.buffers.append(Buffer(name, rows, cols, dtype, kind, writes_per_element))
        return name

    def launch(self, name: str, sms: dict[Role, int], library: Library | None = None) -> int:
        """Open a new launch; later tasks belong to it. Returns its index."""
        self.launches.append(Launch(name, tuple((r, n) for r, n in sms.items() if n > 0), library))
        if library is not None and not self.library_tasks:
            self.elided.append(len(self.launches) - 1)
        return len(self.launches) - 1

    def add(self, rank: int, role: Role, op: Op, *, reads=(), writes=(), accumulate: bool = False,
            waits=(), signals=(), chunk: int = -1, label: str = "", mask: tuple[int, ...] = (),
            index: tuple[int, ...] = (), count: int = 1, step: Step | None = None) -> Task | None:
        """Add a task, or with ``count`` > 1 a group of members differing by ``step`` (its label's
        "{}" takes each member's number); returns it (member 0 of a flat build), or None for a rank
        or a launch not built."""
        if not self.emits(rank) or not self.builds():
            return None
        if count < 1 or (count > 1 and step is None):
            raise ValueError(f"a group of {count} members needs a step")
        if count == 1 and step is not None:  # a group of one: a plain task
            label, step = label.replace("{}", str(step.label[0])), None
        task = Task(len(self.tasks), rank, role, op, tuple(reads), tuple(writes), accumulate,
                    tuple(waits), tuple(signals), len(self.launches) - 1, chunk, label, tuple(mask), tuple(index),
                    count, step)
        self._count(task)
        if count > 1 and not self.grouped:
            members = task.members()
            self.tasks += members
            return members[0]
        self.tasks.append(task)
        return task

    def _count(self, task: Task) -> None:
        """Count ``task``'s bumps (every member's) into :attr:`bumps`."""
        fixed, moving = bump_keys(task, fold=self.first_nodes * self.gpus_per_node)
        for key, times in fixed:
            self.bumps[key] += times
        if moving:
            self.bumps.update(moving)

    def bumped(self, signal: Signal) -> int:
        """How many tasks added so far bump ``signal``: the count a complete wait on it expects."""
        return self.bumps[self._key(signal.rank, signal.name, signal.index)]

    def build(self, flops_per_gpu: float) -> Schedule:
        return Schedule(IR_VERSION, self.kernel, self.variant, self.world, self.gpus_per_node,
                        self.num_sms, tuple(self.buffers), tuple(self.launches), tuple(self.tasks),
                        flops_per_gpu, self.first_nodes, tuple(self.elided))
