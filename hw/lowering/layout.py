"""The device contract: every column of every table the fused kernel reads, the order of each op's
operand regions, the attention locks' and statistics' words, and the error block's fields, named
once.

The planner (:mod:`plan`) writes these tables, the interpreter (:mod:`interp`) and the kernel
(:mod:`fused`, :mod:`tiles`, :mod:`sync`) read them, and the executor decodes the error block.
Each of them imports its columns from here (the Triton modules as ``tl.constexpr`` globals), so a
column moved here moves everywhere, and nothing reads a table by a bare offset.

All tables are int64, row-major, one row per entry.
"""
from __future__ import annotations

from enum import IntEnum

from mkernel.ir import Op

from . import ring


class Task(IntEnum):
    """A task row: op code; reads; [R0, R1) regions (reads, then writes); [W0, W1) waits; [S0, S1)
    signals; [A0, A1) aux rows (gather rows, ring commands, or a folded attention tile's merge
    count); the causal mask's query and key offsets and whether it has one; its attention lock (or
    -1); the schedule task id (error messages); its work in ns of one SM (the adaptive controller;
    0 when the plan is built without a cost model); 1 where the task's writes are adds into the
    destination (the IR's ``accumulate``: an attention merge, or an accumulating COPY, which the
    kernel runs as a bf16 reduce-add into the destination, :data:`COPY_ADD`)."""

    OP = 0
    NREADS = 1
    R0 = 2
    R1 = 3
    W0 = 4
    W1 = 5
    S0 = 6
    S1 = 7
    A0 = 8
    A1 = 9
    Q0 = 10
    K0 = 11
    MASKED = 12
    LOCK = 13
    TASK_ID = 14
    WORK_NS = 15
    ACCUMULATE = 16


class Region(IntEnum):
    """An operand: its slot in the per-call address table (buffer id x world + owning rank), first
    row and column, rows and columns, leading dimension (the buffer's columns), the buffer's rows,
    and the buffer id."""

    SLOT = 0
    ROW0 = 1
    COL0 = 2
    ROWS = 3
    COLS = 4
    LD = 5
    BUF_ROWS = 6
    BUF_ID = 7


class Wait(IntEnum):
    """A wait: the slot on this rank, the bumps it waits for in a call, the slot's bumps per call
    (the epoch target is ``(epoch - 1) * BUMPS + COUNT``)."""

    SLOT = 0
    COUNT = 1
    BUMPS = 2


class Signal(IntEnum):
    """A signal: the rank whose slot is bumped, and the slot."""

    RANK = 0
    SLOT = 1


class Command(IntEnum):
    """An aux row. Ring commands: kind (ring.PUT or ring.SIGNAL), destination rank, flag slot,
    bytes, source and destination heap offsets. A gather's rows hold their source row in column 0
    (SOURCE_ROW); a folded attention tile's one aux row holds its merges per call there (MERGES).
    Those two are aliases of column 0, so they do not widen the row."""

    KIND = 0
    DST_RANK = 1
    FLAG = 2
    NBYTES = 3
    SRC_OFF = 4
    DST_OFF = 5
    SPARE0 = 6
    SPARE1 = 7
    SOURCE_ROW = 0
    MERGES = 0


class GemmTile(IntEnum):
    """A row of the compute role's GEMM table (the flattened tile loop, :func:`fused._gemm_loop`):
    one BM x BN output tile with A's first row, B's first column, C's slot in the address table,
    C's leading dimension, first row and column, the rows and columns of C that the tile writes,
    and the rank and slot the tile bumps when it is done (rank -1: none)."""

    A_ROW0 = 0
    B_COL0 = 1
    C_SLOT = 2
    C_LD = 3
    C_ROW0 = 4
    C_COL0 = 5
    C_ROWS = 6
    C_COLS = 7
    SIG_RANK = 8
    SIG_SLOT = 9


class Segment(IntEnum):
    """A run of GEMM table rows [FIRST, END) that read the same A operand (A_INDEX 0: A, 1: the
    second A) over the same K range: columns [K0, K0 + K_COLS) of A, rows of B."""

    FIRST = 0
    END = 1
    A_INDEX = 2
    K0 = 3
    K_COLS = 4


class Lock(IntEnum):
    """An attention lock (one per query block of a tile, ATTN_QUERY_ROWS rows): the owner word (0
    free, 1 held), the epoch of the last merge into the tile's state, the merges in that epoch."""

    OWNER = 0
    STAMP = 1
    MERGED = 2
    SPARE = 3


class GemmOperand(IntEnum):
    """A GEMM task's regions from its first (``Task.R0``): reads A and B, writes C."""

    A = 0
    B = 1
    C = 2


class AttnOperand(IntEnum):
    """An ATTN task's regions from its first: reads Q, K, V; writes the tile's fp32 accumulator
    and its (m, l) statistics; a folded tile (its NORM runs in its last merge, :mod:`plan`) also
    writes the NORM's out and lse."""

    Q = 0
    K = 1
    V = 2
    ACC = 3
    STATS = 4
    OUT = 5
    LSE = 6


class Stat(IntEnum):
    """A row of an attention tile's statistics buffer (fp32; columns past these unused): the
    running row max m (natural-log units) and the running sum l of exp(s - m)."""

    M = 0
    L = 1


class NormOperand(IntEnum):
    """A NORM task's regions from its first: reads the accumulator and statistics, writes out, lse."""

    ACC = 0
    STATS = 1
    OUT = 2
    LSE = 3


class ErrorField(IntEnum):
    """Byte offsets in the 64-byte device error block (int32 code, rank, role, what; int64 index,
    epoch, seen, expected, schedule task), mirrored from ``csrc/mk_ring.h``'s mk_dev_err (observed
    there is SEEN here). The first error wins; CODE 0 means none."""

    CODE = 0
    RANK = 4
    ROLE = 8
    WHAT = 12
    INDEX = 16
    EPOCH = 24
    SEEN = 32
    EXPECTED = 40
    TASK = 48


class ErrorCode(IntEnum):
    """Device error codes, shared with the proxy's (csrc/mk_ring.h, :data:`ring.ERRORS`)."""

    TIMEOUT = ring.ERR_TIMEOUT
    ABORTED = ring.ERR_ABORTED


# The op set's name for an accumulating COPY (Task.ACCUMULATE on a COPY row: GEMM+RS's push of a partial
# into its owner, mkernel/builders/_gemm_rs_push.py): a compile-time switch of its own (fused.constexprs),
# so kernels without one carry none of its code. One pair of regions: writes[0] += reads[0] in bf16 at the
# destination, atomically per element (several peers add into one owner's tile at once)
COPY_ADD = "copy_add"
ALIGN = 256  # bytes: every heap buffer and symmetric-buffer section starts on this boundary
OPS = tuple(Op)  # op code = index into the IR's Op enum
OP_CODE = {op: i for i, op in enumerate(OPS)}
TASK_WIDTH = len(Task)
REGION_WIDTH = len(Region)
WAIT_WIDTH = len(Wait)
SIGNAL_WIDTH = len(Signal)
COMMAND_WIDTH = len(Command)
GEMM_TILE_WIDTH = len(GemmTile)
SEGMENT_WIDTH = len(Segment)
LOCK_WIDTH = len(Lock)
ERROR_BYTES = 64  # MK_ERROR_BYTES
ATTN_QUERY_ROWS = 128  # query rows of one attention block: each has its own lock, so tiles of several merge in parallel
MAX_SEGMENTS = 4  # GEMM table segments the kernel walks (a longer list: the tiles take the general path)

