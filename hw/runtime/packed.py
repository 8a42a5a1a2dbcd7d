"""A compiled Triton kernel's launch as one packed parameter block, handed to ``cuLaunchKernel``.

Why: Triton 3.6's C launcher parses the whole argument tuple on every launch (the fused kernel's
60-odd arguments, each TMA descriptor expanded into its CUtensorMap, shape and strides: about a
hundred objects), which costs several microseconds of host time per call, though an executor's
arguments only change with the address key of the call's tensors. A :class:`Packed` block holds
every kernel parameter's bytes, laid out once per key exactly as the launcher's own ``void
*params[]`` points at them (one slot per non-constexpr argument in signature order, then the
global and profile scratch pointers), and a launch is one ``cuLaunchKernel`` call through ctypes
with the block's pointer array.

The types come from the compiled kernel's own signature (after Triton's expansion of tensor
descriptors), so the block holds what the C launcher would have built from the same flat list.
What this module does not handle (tuple arguments, a descriptor without TMA metadata, a cluster,
cooperative or PDL launch, no ``libcuda``) makes :func:`signature_types` or :func:`driver` return
None, and the launch keeps Triton's launcher.
"""
from __future__ import annotations

import ctypes
import functools
import re
import struct

MAP_BYTES = 128  # a CUtensorMap, 128-byte aligned (cuda.h)
_SCALARS = {"i1": "b", "i8": "b", "i16": "h", "i32": "i", "i64": "q", "u1": "B", "u8": "B", "u16": "H",
            "u32": "I", "u64": "Q", "fp64": "d"}  # struct formats of the launcher's C types (ty_to_cpp)
_FLOATS = {"fp32", "f32", "fp16", "bf16"}  # passed as their storage bits (the launcher's FLOAT_PACK_FUNCTION)


def signature_types(kernel_signature: dict, names, tensordesc_meta) -> list[str] | None:
    """The launcher's flat argument types for ``names`` in order: each tensor descriptor expanded
    to ``nvTmaDesc``, its shape (i32) and strides (i64), as Triton expands it with TMA metadata;
    None where the kernel has an argument this module does not pack."""
    out, n_desc = [], 0
    for name in names:
        sig = kernel_signature.get(name, "constexpr")
        if not isinstance(sig, str):
            return None  # a tuple argument: the launcher flattens it; not packed here
        if sig.startswith("tensordesc"):
            meta = tensordesc_meta[n_desc] if tensordesc_meta and n_desc < len(tensordesc_meta) else None
            n_desc += 1
            shape = re.match(r"tensordesc<[^[>]*\[([^]]*)\]", sig)
            if meta is None or shape is None:
                return None  # a descriptor lowered to a pointer: the launcher's other expansion
            ndim = shape.group(1).count(",") + 1
            out += ["nvTmaDesc"] + ["i32"] * ndim + ["i64"] * ndim
        elif sig == "constexpr" or sig[0] == "*" or sig in _SCALARS or sig in _FLOATS:
            out.append(sig)
        else:
            return None
    return out


def _float_bits(ty: str, value: float) -> tuple[str, int]:
    if ty == "fp16":
        return "H", struct.unpack("<H", struct.pack("<e", value))[0]
    f32 = struct.unpack("<I", struct.pack("<f", value))[0]
    return ("H", f32 >> 16) if ty == "bf16" else ("I", f32)


def tensor_map_address(obj) -> int | None:
    """The address of a Triton ``PyCUtensorMap``'s CUtensorMap: its object is allocated 128-byte
    aligned with the map as its one 128-aligned member after the object header (driver.c), so the
    map is the last 128 bytes of the object; None for any other layout."""
    size = type(obj).__basicsize__
    if type(obj).__name__ != "PyCUtensorMap" or size != 2 * MAP_BYTES or id(obj) % MAP_BYTES:
        return None
    return id(obj) + size - MAP_BYTES


class Packed:
    """One launch's parameter block: ``values`` (the launcher's flat list, constexprs included)
    packed by ``types``, then the global and profile scratch addresses."""

    __slots__ = ("_buffer", "params", "keep")

    def __init__(self, types: list[str], values: list, global_scratch: int, map_address=tensor_map_address):
        offsets, size = [], 0
        for ty in types:
            if ty == "constexpr":
                continue
            align = MAP_BYTES if ty == "nvTmaDesc" else 8
            size = -(-size // align) * align
            offsets.append(size)
            size += MAP_BYTES if ty == "nvTmaDesc" else 8
        offsets += [size, size + 8]  # the global and profile scratch pointers
        size += 16
        self._buffer = ctypes.create_string_buffer(size + MAP_BYTES)
        base = -(-ctypes.addressof(self._buffer) // MAP_BYTES) * MAP_BYTES
        self.keep = []  # the descriptor objects whose maps were copied (nothing reads them after)
        slot = 0
        for ty, value in zip(types, values, strict=True):
            if ty == "constexpr":
                continue
            at = base + offsets[slot]
            slot += 1
            if ty == "nvTmaDesc":
                src = map_address(value)
                if src is None:
                    raise TypeError(f"not a Triton CUtensorMap: {type(value).__name__}")
                ctypes.memmove(at, src, MAP_BYTES)
                self.keep.append(value)
            elif ty[0] == "*":
                ctypes.c_uint64.from_address(at).value = 0 if value is None else int(value)
            elif ty in _FLOATS:
                fmt, bits = _float_bits(ty, float(value))
                struct.pack_into("<" + fmt, (ctypes.c_char * 8).from_address(at), 0, bits)
            else:
                struct.pack_into("<" + _SCALARS[ty], (ctypes.c_char * 8).from_address(at), 0, value)
        ctypes.c_uint64.from_address(base + offsets[-2]).value = global_scratch or 0
        ctypes.c_uint64.from_address(base + offsets[-1]).value = 0
        self.params = (ctypes.c_void_p * len(offsets))(*(base + o for o in offsets))


class Driver:
    """``cuLaunchKernel`` and ``cuGetErrorName`` of libcuda, by ctypes."""

    def __init__(self, lib):
        self._launch = lib.cuLaunchKernel
        self._launch.restype = ctypes.c_int
        self._launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
        self._name = lib.cuGetErrorName
        self._name.restype = ctypes.c_int
        self._name.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]

    def launch(self, function: int, grid: int, threads: int, shared: int, stream: int, packed: Packed) -> None:
        status = self._launch(function, grid, 1, 1, threads, 1, 1, shared, stream, packed.params, None)
        if status:
            name = ctypes.c_char_p()
            self._name(status, ctypes.byref(name))
            raise RuntimeError(f"cuLaunchKernel failed: {(name.value or b'CUDA error').decode()} ({status})")


@functools.cache
def driver() -> Driver | None:
    """libcuda's launch entry, or None where there is no driver (a CPU machine)."""
    try:
        return Driver(ctypes.CDLL("libcuda.so.1"))
    except OSError:
        return None
