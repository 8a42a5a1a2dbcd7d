"""A standalone persistent kernel that runs the fused kernel's copy, reduce and gather steps from
plan-format tables (layout.Region rows, the ``bases`` address table, gather rows in aux column 0),
on one of four paths, for the one-GPU data-movement benchmark (tools/bench/bench_bulk.py) and the GPU
tests (tests/hw/test_hw_bulk.py):

- ``register``: :mod:`tiles` (masked loads and stores of CR x CC tiles through registers), the
  fused kernel's path today;
- ``bulk``: :mod:`bulk_copy` (1-D ``cp.async.bulk`` through :mod:`bulk`'s ring of shared-memory stages);
- ``tensor``: :mod:`bulk_tensor` (2-D tensor copies of 16 x 256 boxes through host-built tensor
  maps, one per buffer), copies, reduces and accumulates of regions that tile into boxes;
- ``tma``: Triton's own TMA (``tl.make_tensor_descriptor`` built on the device, pipelined
  ``.load`` / ``.store``), copies only: the alternative :mod:`bulk` was weighed against.

Task i runs on block i mod blocks, in order, like the fused kernel's claim counter without the
atomics. Local HBM stands in for a peer: the code path is the same, only the addresses differ.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import triton
import triton.language as tl

from ..kernels import bulk, bulk_copy, bulk_reduce, bulk_tensor, tiles
from ..knobs import DEFAULTS
from ..lowering.layout import COMMAND_WIDTH, REGION_WIDTH
from ..runtime import tensormap
from ..runtime.state import ErrorBlock

NUM_WARPS = 8  # as the fused kernel (fused.NUM_WARPS)
OPTIN_SMEM = 227 * 1024  # an H100/H200 block's most dynamic shared memory (cudaDevAttrMaxSharedMemoryPerBlockOptin)
DEFAULT_SMEM = 180 * 1024  # what the fused GEMM kernels already have (their pipeline buffers)


class Op(IntEnum):
    COPY = 0
    REDUCE = 1
    GATHER = 2
    ACCUMULATE = 3


class Path(IntEnum):
    REGISTER = 0
    BULK = 1
    TMA = 2
    TENSOR = 3


class Row(IntEnum):
    """A task row of the probe's own table (not the plan's layout.Task: a step needs only these):
    its first region, its reads, and its [A0, A1) aux rows (a gather's source rows)."""

    R0 = 0
    NREADS = 1
    A0 = 2
    A1 = 3


C = tl.constexpr
COPY, REDUCE, GATHER, ACCUMULATE = (C(int(o)) for o in Op)
REGISTER, BULK, TMA, TENSOR = (C(int(p)) for p in Path)
TASK_COLS = C(len(Row))
T_R0, T_NREADS, T_A0, T_A1 = (C(int(c)) for c in Row)


@triton.jit
def _copy_tma(regions, bases, r0, nreads, CR: tl.constexpr, CC: tl.constexpr, STAGES: tl.constexpr):
    """writes[i] = reads[i] through device-built TMA descriptors (one per region, in the launch's
    global scratch): TMA loads STAGES - 1 ahead, each tile through registers into a TMA store."""
    for p in range(nreads):
        s_s, s_r0, s_c0, rows, cols, s_ld, _ = tiles._region(regions, r0 + p)
        d_s, d_r0, d_c0, _r, _c, d_ld, _ = tiles._region(regions, r0 + nreads + p)
        src = tiles._buf(bases, s_s, tl.bfloat16, 2) + s_r0 * s_ld + s_c0
        dst = tiles._buf(bases, d_s, tl.bfloat16, 2) + d_r0 * d_ld + d_c0
        sd = tl.make_tensor_descriptor(src, [rows.to(tl.int32), cols.to(tl.int32)], [s_ld, 1], [CR, CC])
        dd = tl.make_tensor_descriptor(dst, [rows.to(tl.int32), cols.to(tl.int32)], [d_ld, 1], [CR, CC])
        tc = tl.cdiv(cols, CC).to(tl.int32)
        for t in tl.range(tl.cdiv(rows, CR).to(tl.int32) * tc, num_stages=STAGES):
            r = (t // tc) * CR
            c = (t % tc) * CC
            dd.store([r, c], sd.load([r, c]))


@triton.jit
def steps_kernel(tasks, regions, bases, maps, aux, n_tasks, timeout_ns, err32, err64, OP: tl.constexpr,
                 PATH: tl.constexpr, CR: tl.constexpr, CC: tl.constexpr, SB: tl.constexpr, RB: tl.constexpr,
                 STAGES: tl.constexpr, LAG: tl.constexpr):
    pid = tl.program_id(0)
    if PATH == BULK or PATH == TENSOR:
        bulk._declare_smem(err64)
    for i in range(pid, n_tasks, tl.num_programs(0)):
        row = tasks + i * TASK_COLS
        r0 = tl.load(row + T_R0)
        nreads = tl.load(row + T_NREADS)
        a0 = tl.load(row + T_A0)
        a1 = tl.load(row + T_A1)
        if PATH == REGISTER:
            if OP == COPY:
                tiles._copy(regions, bases, r0, nreads, CR, CC)
            elif OP == REDUCE:
                tiles._reduce(regions, bases, r0, nreads, CR, CC)
            elif OP == GATHER:
                tiles._gather(regions, bases, aux, r0, a0, a1, CR, CC)
        elif PATH == BULK:
            if OP == COPY:
                bulk_copy._copy(regions, bases, r0, nreads, timeout_ns, err32, err64, 0, 1, i, 1, SB, LAG)
            elif OP == REDUCE:
                bulk_reduce._reduce(regions, bases, maps, r0, nreads, timeout_ns, err32, err64, 0, 1, i, 1, RB, False)
            elif OP == GATHER:
                bulk_copy._gather(regions, bases, aux, r0, a0, a1, timeout_ns, err32, err64, 0, 1, i, 1, SB, LAG)
            else:
                bulk_copy._accumulate(regions, bases, r0, nreads, timeout_ns, err32, err64, 0, 1, i, 1, SB, LAG)
        elif PATH == TENSOR:  # every region boxed (the probe's tasks are chosen so; the fused kernel checks)
            if OP == COPY:
                bulk_tensor._copy(regions, maps, r0, nreads, timeout_ns, err32, err64, 0, 1, i, 1, LAG)
            elif OP == REDUCE:
                bulk_reduce._reduce(regions, bases, maps, r0, nreads, timeout_ns, err32, err64, 0, 1, i, 1, RB, True)
            else:
                bulk_tensor._accumulate(regions, maps, r0, nreads, timeout_ns, err32, err64, 0, 1, i, 1, LAG)
        else:
            _copy_tma(regions, bases, r0, nreads, CR, CC, STAGES)


@dataclass(frozen=True)
class Task:
    """One step: regions as (buffer, row0, col0, rows, cols) of the probe's buffers; ``index``: a
    gather's source rows (relative to its read region's first row)."""

    reads: tuple[tuple[int, int, int, int, int], ...]
    writes: tuple[tuple[int, int, int, int, int], ...]
    index: tuple[int, ...] = ()


def tables(tasks: list[Task], shapes: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(task rows, region rows, aux rows) in the fused kernel's layout; region slot = buffer index.
    Raises ValueError for a region outside its buffer or not in 8-column units (the plan's rules)."""
    rows, regions, aux = [], [], []
    for t in tasks:
        r0, a0 = len(regions), len(aux)
        for buf, row0, col0, n, cols in t.reads + t.writes:
            b_rows, ld = shapes[buf]
            where = f"region (buffer {buf}, rows {row0}+{n}, cols {col0}+{cols})"
            if row0 < 0 or col0 < 0 or row0 + n > b_rows or col0 + cols > ld:
                raise ValueError(f"{where} is outside buffer {buf} ({b_rows} x {ld})")
            if col0 % 8 or cols % 8 or ld % 8:
                raise ValueError(f"{where} of a {ld}-column buffer is not in 8-column units (16-byte bulk copies)")
            regions.append((buf, row0, col0, n, cols, ld, b_rows, buf))
        aux.extend((i, 0, 0, 0, 0, 0, 0, 0) for i in t.index)
        rows.append((r0, len(t.reads), a0, len(aux)))  # in Row order
    as_table = lambda x, width: np.asarray(x, np.int64).reshape(-1, width)
    return as_table(rows, int(TASK_COLS)), as_table(regions, REGION_WIDTH), as_table(aux, COMMAND_WIDTH)


class Probe:
    """One op on one path over fixed tasks and buffers (bf16 CUDA tensors), on ``blocks`` SMs.
    ``smem``: the bulk path's dynamic shared memory per block (its ring; refused when it holds no
    stage, unless ``refuse_small_ring`` is off to test the device's own check); the other paths get
    what Triton allocated; ``lag``: how many stores a bulk refill leaves in flight (bulk_copy._pipe).
    Compiled on construction; each call launches once on the current stream."""

    def __init__(self, op: Op, path: Path, tasks: list[Task], buffers: list, blocks: int, smem: int = DEFAULT_SMEM,
                 timeout_s: float = 2.0, copy_rows: int = DEFAULTS.copy_rows, stage_bytes: int = bulk.STAGE_BYTES,
                 reduce_bytes: int = bulk.REDUCE_BYTES, tma_stages: int = 4,
                 lag: int = bulk.LAG, refuse_small_ring: bool = True):
        import torch

        if (path is Path.TMA and op is not Op.COPY or path is Path.REGISTER and op is Op.ACCUMULATE
                or path is Path.TENSOR and op is Op.GATHER):
            raise ValueError(f"the {path.name.lower()} path has no {op.name.lower()} step")
        if path is Path.TENSOR:
            _check_boxed(tasks, buffers)
            if op is Op.REDUCE and reduce_bytes != bulk_tensor.BOX_BYTES:
                raise ValueError(f"reduce_bytes {reduce_bytes}: the tensor path's reduce stage holds one "
                                 f"{bulk_tensor.BOX_BYTES}-byte box per source")
        if not 0 <= lag <= bulk.MAX_LAG:
            raise ValueError(f"lag {lag}: a refill leaves 0 ... {bulk.MAX_LAG} store groups in flight")
        if not 0 < smem <= OPTIN_SMEM:
            raise ValueError(f"smem {smem}: a block has at most {OPTIN_SMEM} bytes of dynamic shared memory")
        unit = reduce_bytes * max(len(t.reads) for t in tasks) if op is Op.REDUCE else stage_bytes
        unit = bulk_tensor.BOX_BYTES if path is Path.TENSOR and op is not Op.REDUCE else unit
        ring = path in (Path.BULK, Path.TENSOR)
        if ring and refuse_small_ring and bulk.stages(smem, unit) < 1:
            raise ValueError(f"smem {smem}: the bulk ring holds no stage of {unit} bytes (and {int(bulk.DATA0)} "
                             f"bytes of mbarriers)")
        dev = buffers[0].device
        t, r, a = tables(tasks, [tuple(b.shape) for b in buffers])
        self.tasks, self.regions = torch.from_numpy(t).to(dev), torch.from_numpy(r).to(dev)
        self.aux = torch.from_numpy(a if len(a) else np.zeros((1, COMMAND_WIDTH), np.int64)).to(dev)
        self.bases = torch.tensor([b.data_ptr() for b in buffers], dtype=torch.int64, device=dev)
        slots = [(b.data_ptr(), *b.shape) for b in buffers] if path is Path.TENSOR else []
        self.maps = torch.from_numpy(tensormap.table(slots)).to(dev)
        self.err = ErrorBlock(dev)
        self.buffers = buffers  # keep the tensors the address table points at alive
        self.blocks = blocks
        self.args = [self.tasks, self.regions, self.bases, self.maps, self.aux, len(tasks), int(timeout_s * 1e9),
                     self.err.words.view(torch.int32), self.err.words]
        self.const = dict(OP=int(op), PATH=int(path), CR=copy_rows, CC=256, SB=stage_bytes, RB=reduce_bytes,
                          STAGES=tma_stages, LAG=lag)
        self.kernel = steps_kernel.warmup(*self.args, **self.const, grid=(blocks,), num_warps=NUM_WARPS)
        self.kernel._init_handles()
        shared = self.kernel.metadata.shared
        if ring:
            shared = max(shared, smem)
            _raise_shared_limit(self.kernel.function, shared)
        self.packed = (self.kernel.metadata.num_warps, self.kernel.metadata.num_ctas, shared)
        self.values = [_raw(v) for v in self.args] + list(self.const.values())

    def __call__(self, blocks: int | None = None) -> None:
        """One launch on ``blocks`` SMs (default: the constructor's) on the current stream."""
        import torch

        stream = torch.cuda.current_stream().cuda_stream
        k = self.kernel
        k.run(blocks or self.blocks, 1, 1, stream, k.function, self.packed, None, None, None, *self.values)

    def error(self) -> str | None:
        """The device's first recorded failure after the calls so far, or None (synchronises)."""
        failure = self.err.read()
        return None if failure is None else f"{failure} (task {self.err.task()})"


def _check_boxed(tasks: list[Task], buffers: list) -> None:
    """Raise ValueError unless every region of every task tiles into the tensor path's boxes and its
    buffer has a tensor map (the probe runs the path unchecked on the device)."""
    for i, t in enumerate(tasks):
        for buf, _r0, _c0, n, cols in t.reads + t.writes:
            b = buffers[buf]
            if n % bulk_tensor.BOX_ROWS or cols % bulk_tensor.BOX_COLS or not tensormap.mappable(b.data_ptr(), *b.shape):
                raise ValueError(f"task {i}: region of {n} x {cols} in buffer {buf} ({tuple(b.shape)}) is not "
                                 f"{bulk_tensor.BOX_ROWS} x {bulk_tensor.BOX_COLS} boxes of a mappable buffer")


def _raw(v):
    return v.data_ptr() if hasattr(v, "data_ptr") else v


def _raise_shared_limit(function: int, nbytes: int) -> None:
    """Let ``function`` launch with ``nbytes`` of dynamic shared memory. Triton raises the limit
    itself only for kernels that allocate more than 48 KiB; the bulk ring is invisible to it."""
    if nbytes <= 48 * 1024:
        return
    lib = ctypes.CDLL("libcuda.so.1")
    max_dynamic = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    rc = lib.cuFuncSetAttribute(ctypes.c_void_p(function), ctypes.c_int(max_dynamic), ctypes.c_int(nbytes))
    if rc != 0:
        raise RuntimeError(f"cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, {nbytes}) failed with CUresult {rc}")
