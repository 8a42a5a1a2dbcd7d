"""The schedule IR: what a fused op does, as data that every backend executes.

A :class:`Schedule` is a set of symmetric :class:`Buffer` s (one array per rank), one or more
:class:`Launch` es (stream-ordered kernels, each with an SM budget per :class:`Role`), and a flat
tuple of :class:`Task` s. A task is one unit of one role's work on one rank. The tasks of one
(rank, launch, role) form a queue in tuple order: the role's SMs take them in that order, like the
blocks of a persistent kernel walking a task table.

Synchronisation is explicit. A task :class:`Wait` s until a :class:`Signal` on its own rank reaches a
count, and bumps the signals it names by one when its writes are visible (for a network put, when
the data has landed at the remote rank). Signals are epoch-stamped in every backend: a value
counts only if it was written in the current call's epoch, so no flag is zeroed between calls.

A task may stand for ``count`` > 1 tasks, its *members* (the tiles of a compute wave, say): member i
is the task with every number of its :class:`Step` times i added (regions move by rows, columns or
ranks; signals and waits by index or rank; the label's number by its step; signals may instead
cycle, ``Step.period``, and members may wrap, within each cycle, ``Step.rotate``). Members are
consecutive in their queue, with consecutive ids in :func:`expand`, which gives the flat schedule
the group stands for; the simulator runs a group with one cost and one event where its members
would start and end together, and every other consumer may expand.

Everything here is a frozen dataclass of ints, strings, enums and tuples, so schedules can be
hashed, compared, and serialized. Derived views are plain functions. Builders make a schedule with
the one mutable helper, :class:`~mkernel.schedule_builder.ScheduleBuilder`.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, NamedTuple

from .slots import paused_gc, quick_init, quick_new  # (paused_gc: imported from here by builders, validate, the sim)

if TYPE_CHECKING:
    from .members import RegionTable

IR_VERSION = 1
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
COMMAND_BYTES = 48  # one command record in the GPU -> host ring (design §5)


class Role(str, Enum):
    """What a block of a persistent kernel does. The host proxy is not an SM role."""

    COMPUTE = "compute"
    INTRA = "intra"  # NVLink peer loads/stores inside the node
    SEND = "send"  # writes network commands for the proxy
    RECV = "recv"  # polls arrival flags, finishes received chunks


class Op(str, Enum):
    """The kinds of task. Operands are regions; see :class:`Task` for each op's arity."""

    GEMM = "gemm"  # writes[0] (+)= reads[0] @ reads[1]
    COPY = "copy"  # writes[i] (+)= reads[i]   (NVLink or local)
    REDUCE = "reduce"  # writes[0] (+)= sum(reads)
    GATHER = "gather"  # writes[0][i] = reads[0][index[i]]: rows picked by a data-dependent list (MoE)
    PUT = "put"  # writes[i] = reads[i] on a rank of another node: one network message
    ATTN = "attn"  # (acc, stats) merge= softmax(q k^T / sqrt(d)) v over reads (q, k, v): online softmax
    NORM = "norm"  # (out, lse) = (acc / l, m + log l) from reads (acc, stats): finishes an attention tile
    NOP = "nop"  # only waits and signals (e.g. a kernel's final drain)


class BufferKind(str, Enum):
    INPUT = "input"  # filled by the caller; never written by tasks
    SCRATCH = "scratch"  # staging and partial results
    OUTPUT = "output"  # the op's result; every element written a known number of times


@dataclass(frozen=True, slots=True)
class Buffer:
    """A symmetric 2-D array: one ``rows x cols`` array of ``dtype`` on every rank."""

    name: str
    rows: int
    cols: int
    dtype: str = "bf16"
    kind: BufferKind = BufferKind.SCRATCH
    writes_per_element: int = 1  # checked for OUTPUT buffers: plain writes + accumulations

    @property
    def itemsize(self) -> int:
        return DTYPE_BYTES[self.dtype]


@quick_init
@dataclass(frozen=True, slots=True)
class Region:
    """Rows ``[row0, row1)`` and columns ``[col0, col1)`` of one rank's copy of a buffer."""

    buffer: str
    rank: int
    row0: int
    row1: int
    col0: int
    col1: int

    @property
    def shape(self) -> tuple[int, int]:
        return (self.row1 - self.row0, self.col1 - self.col0)

    @property
    def size(self) -> int:
        return (self.row1 - self.row0) * (self.col1 - self.col0)

    def __str__(self) -> str:
        return f"{self.buffer}@{self.rank}[{self.row0}:{self.row1},{self.col0}:{self.col1}]"


@quick_init
@dataclass(frozen=True, slots=True)
class Signal:
    """A counter in one rank's memory, named by ``name`` and an integer ``index``."""

    rank: int
    name: str
    index: int = 0

    def __str__(self) -> str:
        return f"{self.name}[{self.index}]@{self.rank}"


@quick_init
@dataclass(frozen=True, slots=True)
class Wait:
    """Block until ``signal`` has been bumped ``count`` times in the current epoch."""

    signal: Signal
    count: int


@quick_init
@dataclass(frozen=True, slots=True)
class Step:
    """How member i of a grouped task differs from member 0: i times each number here, added.

    ``regions``: per region of ``reads + writes``, (rank, row, column) steps; ``signals``: per signal,
    (rank, index) steps; ``waits``: per wait, its signal's index step (counts are the same); ``chunk``:
    the chunk's step; ``label``: member 0's number and its step, written where the label says "{}".
    An empty tuple means no step for any of its items.

    ``period`` > 0 makes the signals' steps cycle: member i's are (i mod period) times ``signals``
    plus (i div period) times ``outer`` (per signal, (rank, index) steps). A wave of GEMM tiles
    along a row bumps each owner's counter in turn, so the rank steps within a cycle of owners
    and the index from one cycle to the next; every other number steps by the member's offset
    (:meth:`Task.offset`: i, or i wrapped as below).

    ``rotate`` = r > 0: the members wrap within each cycle of p (``period``, or the whole group
    without one), as a rank that takes each slot's tiles from its own on does: member i = a p + b
    steps by a p + b', where b' = b for b < p - r and b - p from there on (so member p - r of a
    cycle is the one r steps back from the cycle's first, and member p - 1 the one before it); its
    signals by b' times ``signals`` plus a times ``outer`` where they cycle. A group of several
    cycles is one tile row of such a rank: each slot's tiles l .. G - 1, then 0 .. l - 1. validate()
    holds it to 0 < r < p, whole cycles, and waits and chunk that do not step."""

    regions: tuple[tuple[int, int, int], ...] = ()
    signals: tuple[tuple[int, int], ...] = ()
    waits: tuple[int, ...] = ()
    chunk: int = 0
    label: tuple[int, int] = (0, 0)
    period: int = 0
    outer: tuple[tuple[int, int], ...] = ()
    rotate: int = 0


@quick_init
@dataclass(frozen=True, slots=True)
class Task:
    """One unit of work of one role on one rank.

    Op arity: GEMM reads (A, B) and writes (C,); COPY and PUT read and write equal-length tuples of
    equal-shaped regions, pairwise; REDUCE reads n >= 1 regions and writes one; NOP touches nothing.
    ATTN reads (q, k, v) and writes (acc, stats); NORM reads (acc, stats) and writes (out, lse).
    ``accumulate`` makes the write an add into the destination. ``chunk`` names the network chunk a
    PUT carries (-1 elsewhere). ``mask`` is an ATTN's causal mask: the global positions of its first
    query and first key row (key j is visible to query i when k0 + j <= q0 + i), or () for none.
    ``index`` is a GATHER's row list: row i of writes[0] is row index[i] of reads[0].
    ``count`` > 1 makes it a group of that many members, ``step`` saying how they differ (see the
    module docstring); its fields are member 0's, but for a label with "{}" in it.
    """

    id: int
    rank: int
    role: Role
    op: Op
    reads: tuple[Region, ...] = ()
    writes: tuple[Region, ...] = ()
    accumulate: bool = False
    waits: tuple[Wait, ...] = ()
    signals: tuple[Signal, ...] = ()
    launch: int = 0
    chunk: int = -1
    label: str = ""
    mask: tuple[int, ...] = ()
    index: tuple[int, ...] = ()
    count: int = 1
    step: Step | None = None

    def describe(self) -> str:
        """A short name for error messages: id, op, rank, role and label."""
        tag = f" '{self.label}'" if self.label else ""
        group = f", {self.count} members" if self.count > 1 else ""
        return f"task {self.id} ({self.op.value}{tag}, rank {self.rank}, role {self.role.value}{group})"

    def member(self, i: int, id: int | None = None) -> Task:
        """Member ``i`` of a group (a plain task, id ``id`` or this one's); the task itself for 0 of 1."""
        if self.count == 1:
            return self if id is None or id == self.id else Task(
                id, self.rank, self.role, self.op, self.reads, self.writes, self.accumulate, self.waits,
                self.signals, self.launch, self.chunk, self.label, self.mask, self.index)
        st, o = self.step, self.offset(i)
        moved, signals = self.moved(i)
        waits = tuple(Wait(Signal(w.signal.rank, w.signal.name, w.signal.index + o * dx), w.count)
                      for w, dx in zip(self.waits, st.waits or (0,) * len(self.waits)))
        first, by = st.label
        label = self.label.replace("{}", str(first + o * by))
        n = len(self.reads)
        return Task(self.id + i if id is None else id, self.rank, self.role, self.op, moved[:n], moved[n:],
                    self.accumulate, waits, signals, self.launch, self.chunk + o * st.chunk, label, self.mask,
                    self.index)

    def offset(self, i: int) -> int:
        """How many steps member ``i`` is from member 0: i, or i - p where the members wrap
        (``Step.rotate`` = r: i mod p >= p - r, p the period or the count)."""
        r = self.step.rotate if self.count > 1 else 0
        if not r:
            return i
        p = self.step.period or self.count
        return i - p if i % p >= p - r else i

    def moved(self, i: int) -> tuple[tuple[Region, ...], tuple[Signal, ...]]:
        """Member ``i``'s regions (reads, then writes) and signals: the fields whose ranks may step
        (validate checks a group's last member by these alone; waits step by index only)."""
        st = self.step
        regions = self.reads + self.writes
        if self.count == 1 or i == 0:
            return regions, self.signals
        if st.regions:  # (a region that does not step is member 0's own)
            o = self.offset(i)
            regions = tuple([r if not (dk or dr or dc) else
                             Region(r.buffer, r.rank + o * dk, r.row0 + o * dr, r.row1 + o * dr, r.col0 + o * dc,
                                    r.col1 + o * dc) for r, (dk, dr, dc) in zip(regions, st.regions)])
        return regions, self.member_signals(i)

    def region_rank(self, k: int, i: int) -> int:
        """The rank of member ``i``'s region ``k`` of ``reads + writes`` (``moved(i)[0][k].rank``),
        without building the member: a network put's destination is its first write's."""
        n = len(self.reads)
        rank = self.reads[k].rank if k < n else self.writes[k - n].rank
        if self.count == 1 or i == 0 or not self.step.regions:
            return rank
        return rank + self.offset(i) * self.step.regions[k][0]

    def member_signals(self, i: int) -> tuple[Signal, ...]:
        """Member ``i``'s signals."""
        st, signals = self.step, self.signals
        if self.count == 1 or i == 0:
            return signals
        if st.period:
            a, b = divmod(i, st.period)
            if st.rotate and b >= st.period - st.rotate:  # (wrapped within its cycle)
                b -= st.period
            return tuple([g if not (dk or dx or ok or ox) else
                          Signal(g.rank + b * dk + a * ok, g.name, g.index + b * dx + a * ox)
                          for g, (dk, dx), (ok, ox) in zip(signals, st.signals, st.outer)])
        if st.signals:
            o = self.offset(i)
            return tuple([g if not (dk or dx) else Signal(g.rank + o * dk, g.name, g.index + o * dx)
                          for g, (dk, dx) in zip(signals, st.signals)])
        return signals

    def members(self) -> list[Task]:
        """Every member, ids counted on from this task's."""
        return [self.member(i) for i in range(self.count)]


# Region(...), Signal(...), Step(...), Task(...) and Wait(...) at about a third of the cost, every field given
# (the builders' hot paths: slots.quick_new)
new_region, new_signal, new_step, new_task = quick_new(Region), quick_new(Signal), quick_new(Step), quick_new(Task)
new_wait = quick_new(Wait)


class MemberRef(NamedTuple):
    """Member ``i`` of the group ``task``, numbered ``id``, not built. A consumer that reads a
    few of a member's fields reads them through its group (:meth:`Task.region_rank`,
    :meth:`Task.member_signals`); building the member (:meth:`Task.member`) makes every region,
    signal and wait of it, and the simulator hands each of a run's network puts on this way."""

    task: Task
    i: int
    id: int

    def build(self) -> Task:
        """The member as a plain task (:meth:`Task.member`)."""
        return self.task.member(self.i, self.id)

    def describe(self) -> str:
        return self.build().describe()


def expand(s: Schedule) -> Schedule:
    """The flat schedule a grouped one stands for: every group replaced by its members, ids renumbered."""
    if all(t.count == 1 for t in s.tasks):
        return s
    tasks: list[Task] = []
    for t in s.tasks:
        for i in range(t.count):
            tasks.append(t.member(i, len(tasks)))
    return Schedule(s.version, s.kernel, s.variant, s.world, s.gpus_per_node, s.num_sms, s.buffers, s.launches,
                    tuple(tasks), s.flops_per_gpu, s.first_nodes, s.elided, s.local_fold)


@dataclass(frozen=True, slots=True)
class Library:
    """The library call a baseline's launch stands for: a collective of ``nbytes`` per rank
    (nccl-tests' sizes: :mod:`mkernel.nccl`), or a dense ``gemm`` of ``shape`` (m, n, k). Its tasks
    compute the data; a timing run takes its time from the call's model (:mod:`mkernel.sim.library`)."""

    kind: str  # a collective of mkernel.nccl.COLLECTIVES, or "gemm"
    nbytes: int = 0
    shape: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Launch:
    """One kernel launch. ``sms`` gives each role's SM budget on every rank; launches run in order.
    ``library``: the library call it stands for (baselines only)."""

    name: str
    sms: tuple[tuple[Role, int], ...]
    library: Library | None = None

    def budget(self, role: Role) -> int:
        return dict(self.sms).get(role, 0)


@dataclass(frozen=True, slots=True)
class Schedule:
    """A whole op on a whole cluster. Build one with :class:`~mkernel.schedule_builder.ScheduleBuilder`."""

    version: int
    kernel: str
    variant: str  # "fused" or a baseline name
    world: int
    gpus_per_node: int
    num_sms: int
    buffers: tuple[Buffer, ...]
    launches: tuple[Launch, ...]
    tasks: tuple[Task, ...]
    flops_per_gpu: float = 0.0  # useful FLOPs one GPU performs (the TFLOPS metric's numerator)
    first_nodes: int = 0  # > 0: the tasks of the first nodes only, the rest alike (ScheduleBuilder)
    elided: tuple[int, ...] = ()  # library launches whose tasks a timing build left out (ScheduleBuilder)
    local_fold: int = 0  # > 0: each built node's local rank 0 alone, standing for this many ranks (ScheduleBuilder)

    def buffer(self, name: str) -> Buffer:
        for buf in self.buffers:
            if buf.name == name:
                return buf
        raise KeyError(f"schedule {self.kernel}/{self.variant} has no buffer {name!r}")

    def queues(self) -> dict[tuple[int, int, Role], list[Task]]:
        """Every (rank, launch, role) queue, each in task order."""
        out: dict[tuple[int, int, Role], list[Task]] = {}
        for t in self.tasks:
            out.setdefault((t.rank, t.launch, t.role), []).append(t)
        return out

    def validate(self, races: bool = True) -> RegionTable | None:
        """Raise :class:`~mkernel.errors.ScheduleError` naming the first broken rule, else return the
        region table read on the way (:func:`mkernel.validation.validate`: a backend may be handed it).
        ``races=False`` skips the race check, the one rule whose cost grows faster than the tasks."""
        from .validation import validate

        return validate(self, races)
