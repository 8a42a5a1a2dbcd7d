"""Host-built TMA tensor maps for the bulk path's 2-D box copies (:mod:`..kernels.bulk_tensor`).

A tensor map (CUtensorMap, 128 bytes) describes one bf16 matrix in global memory (address, rows,
columns, row stride) and the box one tensor copy moves. The driver builds it
(``cuTensorMapEncodeTiled``, called through ctypes: a microsecond or two each); the kernel reads
it from a table in device memory, one entry per slot of the address table: the map, and a word
saying whether the slot has one. Maps depend on the buffers' addresses, so a table is built per
address table and cached with it (:class:`..launch.Addresses`' key).

Why not Triton's host ``TensorDescriptor``: it becomes one kernel parameter per descriptor (fixed
at compile time in number), while a step's regions name any slot of the address table.
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np

from ..kernels.bulk_tensor import BOX_COLS, BOX_ROWS, ENTRY_WORDS, MAP_BYTES, MAPPED_WORD

BF16 = 9  # CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
INTERLEAVE_NONE, SWIZZLE_NONE, L2_PROMOTION_128B, OOB_FILL_NONE = 0, 0, 2, 0
MAP_ALIGN = 16  # bytes: a map's address and row stride must be multiples of it (the driver's rule; the heap's is layout.ALIGN)


def mappable(address: int, rows: int, cols: int) -> bool:
    """Whether a rows x cols bf16 matrix at ``address`` can have a map with the kernels' box: a
    16-byte aligned address and row stride, and at least one box across and down (a region that
    tiles into boxes then lies inside it)."""
    return address % MAP_ALIGN == 0 and (cols * 2) % MAP_ALIGN == 0 and cols >= BOX_COLS and rows >= BOX_ROWS


@functools.cache
def _encoder():
    lib = ctypes.CDLL("libcuda.so.1")
    fn = lib.cuTensorMapEncodeTiled
    u32p, u64p = ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint64)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, u64p, u64p, u32p, u32p,
                   ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def encode(address: int, rows: int, cols: int) -> bytes:
    """The map of a rows x cols row-major bf16 matrix at ``address`` with the kernels' 16 x 256 box.
    Raises ValueError for a matrix :func:`mappable` refuses, RuntimeError for the driver's refusal."""
    if not mappable(address, rows, cols):
        raise ValueError(f"a {rows} x {cols} bf16 matrix at {address:#x} has no tensor map: it needs a 16-byte "
                         f"aligned address and row stride, and at least {BOX_ROWS} x {BOX_COLS} elements")
    out = (ctypes.c_uint8 * (MAP_BYTES + 64))()  # CUtensorMap is 64-byte aligned
    at = ctypes.addressof(out) + (-ctypes.addressof(out)) % 64
    dims = (ctypes.c_uint64 * 2)(cols, rows)
    strides = (ctypes.c_uint64 * 1)(cols * 2)
    box = (ctypes.c_uint32 * 2)(BOX_COLS, BOX_ROWS)
    steps = (ctypes.c_uint32 * 2)(1, 1)
    rc = _encoder()(ctypes.c_void_p(at), BF16, 2, ctypes.c_void_p(address), dims, strides, box, steps,
                    INTERLEAVE_NONE, SWIZZLE_NONE, L2_PROMOTION_128B, OOB_FILL_NONE)
    if rc != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled({rows} x {cols} bf16 at {address:#x}) failed with CUresult {rc}")
    return ctypes.string_at(at, MAP_BYTES)


def table(slots: list[tuple[int, int, int]]) -> np.ndarray:
    """The kernels' maps table (int64 [slots x ENTRY_WORDS]: each slot's map, then 1 in its
    MAPPED_WORD) for slots given as (address, rows, cols) of bf16 matrices; a slot with address 0
    or one :func:`mappable` refuses gets no map (its regions take 1-D copies)."""
    out = np.zeros((max(len(slots), 1), ENTRY_WORDS), np.int64)
    for i, (address, rows, cols) in enumerate(slots):
        if address and mappable(address, rows, cols):
            out[i, :MAPPED_WORD] = np.frombuffer(encode(address, rows, cols), np.int64)
            out[i, MAPPED_WORD] = 1
    return out
