"""The fused kernel's launch: every argument by name, built once per executor; a call sets four.

Why not ``fused_kernel[grid](...)`` on every call: Triton's JIT entry binds the kernel's 60-odd
arguments, computes their specialisation key and looks the binary up each time, tens of
microseconds of Python per call, although an executor's arguments never change between calls
except the address table of the call's tensors and the three TMA descriptors of its GEMM
operands. So :class:`Launch` holds the whole argument list by name; the first call goes through the
JIT (it compiles, checks and caches as usual), and later calls hand the compiled kernel the same
list with the per-call values in their places, through Triton's own launcher. Where that launcher
is the one Triton 3.6 builds (a C ``launch`` behind a Python wrapper that expands each TMA
descriptor into its CUtensorMap, shape and strides, per call), the expanded arguments are built
once per descriptor and handed to the C function directly; on another Triton, the wrapper. And
where the caller names its per-call values by a key (the executor's address key), that flat list
is packed once into the kernel's parameter block (:mod:`packed`), and a later call with the same key
is one ``cuLaunchKernel`` (:meth:`Launch.cached`): no argument is parsed again.

:class:`Addresses` and :class:`Descriptors` build the two per-call values from a call's tensors,
cached by address so that calls reusing their tensors (training steps, benchmarks, graph replays)
build nothing.
"""
from __future__ import annotations

import functools
from collections import OrderedDict

import numpy as np

from .packed import Packed, driver, signature_types

CACHED_CALLS = 16  # address tables and descriptors kept per executor (the allocator cycles a few addresses)


class Launch:
    """One kernel's launch with fixed grid, options and arguments; ``per_call`` names the arguments a
    call supplies. Arguments are given by the kernel's parameter names (constexprs included)."""

    def __init__(self, kernel, grid: int, args: dict, options: dict, per_call: tuple[str, ...]):
        names = list(kernel.arg_names)
        unknown = set(args) - set(names)
        missing = set(names) - set(args) - set(per_call)
        if unknown or missing:
            raise TypeError(f"{kernel.__name__} launch: unknown arguments {sorted(unknown)}, missing {sorted(missing)}")
        self.kernel, self.grid, self.options = kernel, grid, options
        self.args = args
        self._slots = {name: names.index(name) for name in per_call}
        # the compiled launcher takes pointers as integers: no data_ptr() call per argument per launch
        self._values = [_raw(args.get(n)) for n in names]
        self._compiled = None
        self._direct = None  # (C launch, its fixed arguments, flat argument template, per-call slots), or False
        self._expanded: OrderedDict[tuple, list] = OrderedDict()
        self._types = None  # the flat template's C types (packed.signature_types), or None: no packed launches
        self._packed: OrderedDict[object, Packed] = OrderedDict()  # a call key -> its parameter block
        self._scratch = None  # the kernel's global scratch (device-built TMA descriptors): one buffer, every call

    def _allocate(self, size: int, alignment: int, stream=None):
        """Triton's allocator protocol, answered with this launch's one scratch buffer: calls never
        overlap (the executor's rule), so every call and every graph replay may use the same bytes,
        and the direct path passes the address the JIT path was given."""
        import torch

        if self._scratch is None or self._scratch.numel() < size:
            self._scratch = torch.empty(size + alignment, dtype=torch.uint8, device="cuda")
        return _Aligned(self._scratch.data_ptr(), alignment)

    def _with_scratch(self, fn):
        """Run ``fn`` with this launch's scratch as Triton's allocator (restored after: a user's
        allocator stays theirs)."""
        from triton.runtime import _allocation

        token = _allocation._allocator.set(self._allocate)
        try:
            return fn()
        finally:
            _allocation._allocator.reset(token)

    def cached(self, stream: int, key) -> bool:
        """Launch the parameter block of an earlier call with this ``key`` (the caller's name for its
        per-call values) if there is one and nothing listens to launches; False: call the launch."""
        hit = self._packed.get(key)
        if hit is None or not _quiet():
            return False
        self._packed.move_to_end(key)
        function, grid, threads, shared = self._geometry
        driver().launch(function, grid, threads, shared, stream, hit)
        return True

    def __call__(self, stream: int, key=None, **per_call) -> None:
        """Launch on ``stream`` (a raw CUDA stream handle) with this call's values (tensors as
        tensors: the first call's JIT infers pointer types from them). ``key``: a name for these
        values under which their packed parameter block is kept for :meth:`cached`."""
        if self._compiled is None:
            unwrapped = {n: v.descriptor if isinstance(v, Desc) else v for n, v in per_call.items()}
            self._compiled = self._with_scratch(
                lambda: self.kernel[(self.grid,)](**self.args, **unwrapped, **self.options))
            return
        hooks = knobs()
        quiet = _quiet()
        if self._direct is None:
            self._direct = self._prepare(self._compiled, per_call)
        if self._direct and quiet:
            raw, fixed, template, slots = self._direct
            flat = template.copy()
            for name, value in per_call.items():
                pos, meta = slots[name]
                if meta is False:
                    flat[pos] = _raw(value)
                else:
                    args = self._expand(value, meta)
                    flat[pos:pos + len(args)] = args
            if key is None or self._types is None:
                raw(self.grid, 1, 1, stream, *fixed, *flat)
                return
            if len(self._packed) >= CACHED_CALLS:
                self._packed.popitem(last=False)
            block = self._packed[key] = Packed(self._types, flat, fixed[3])
            block.keep.append(per_call)  # the call's tensors (the address table) live as long as the block
            function, grid, threads, shared = self._geometry
            driver().launch(function, grid, threads, shared, stream, block)
            return
        values = self._values.copy()
        for name, value in per_call.items():
            values[self._slots[name]] = value.descriptor if isinstance(value, Desc) else _raw(value)
        k = self._compiled
        if quiet:  # no profiler listening: nothing to describe or call per launch
            self._with_scratch(lambda: k.run(self.grid, 1, 1, stream, k.function, k.packed_metadata, None, None, None,
                                             *values))
        else:
            self._with_scratch(lambda: k.run(self.grid, 1, 1, stream, k.function, k.packed_metadata,
                                             k.launch_metadata((self.grid, 1, 1), stream, *values),
                                             hooks.launch_enter_hook, hooks.launch_exit_hook, *values))

    def _prepare(self, k, per_call: dict):
        """The C launch function of Triton 3.6's launcher and a flat template of this kernel's
        arguments (each descriptor expanded to its CUtensorMap, shape and strides), or False
        (another launcher, or a kernel that asks for profiler scratch: the wrapper path then). A kernel's
        global scratch (device-built descriptors) is this launch's one buffer, on both paths."""
        runner = getattr(k, "run", None)
        inner = getattr(runner, "launch", None)
        cells = dict(zip(getattr(getattr(inner, "__code__", None), "co_freevars", ()),
                         (c.cell_contents for c in (getattr(inner, "__closure__", None) or ()))))
        raw = cells.get("launcher", inner if not cells else None)
        signature = getattr(getattr(k, "src", None), "signature", None)
        if raw is None or signature is None or getattr(k.metadata, "profile_scratch_size", 0):
            return False
        scratch = None
        if k.metadata.global_scratch_size:  # as Triton's wrapper sizes it: one slice per block
            scratch = self._allocate(self.grid * getattr(runner, "num_ctas", 1) * k.metadata.global_scratch_size,
                                     k.metadata.global_scratch_align).data_ptr()
        metas = list(getattr(k.metadata, "tensordesc_meta", None) or [])
        template, slots, n_desc = [], {}, 0
        for name, value in zip(self.kernel.arg_names, self._values):
            sig = signature.get(name, "constexpr")
            is_desc = isinstance(sig, str) and sig.startswith("tensordesc")
            meta = (metas[n_desc] if metas else None) if is_desc else False
            n_desc += is_desc
            if name in self._slots:
                slots[name] = (len(template), meta)
                template.extend(self._expand(per_call[name], meta) if is_desc else [None])
            elif is_desc:
                template.extend(self._expand(value, meta))
            else:
                template.append(value)
        # the C launch's leading arguments after the grid and stream (its format "iiiKKppOOOOOO"):
        # function, cooperative, PDL, global and profile scratch, kernel metadata, launch metadata
        # and the two hooks (none: nothing listens)
        fixed = (k.function, runner.launch_cooperative_grid, runner.launch_pdl, scratch, None, k.packed_metadata, None,
                 None, None)
        # packed launches (hw/runtime/packed.py): a plain launch (one CTA per program, no cooperative
        # grid or PDL) of a kernel whose every argument the packer knows, where libcuda is loaded
        if driver() is not None and not runner.launch_cooperative_grid and not runner.launch_pdl:
            num_warps, num_ctas, shared = k.packed_metadata
            types = signature_types(signature, self.kernel.arg_names, metas)
            if types is not None and len(types) == len(template) and num_ctas == 1:
                self._types, self._geometry = types, (k.function, self.grid, 32 * num_warps, shared)
        return raw, fixed, template, slots

    def _expand(self, desc, meta) -> list:
        """A descriptor's launch arguments (its CUtensorMap, shape and strides), built once per key
        (every descriptor of one launch slot has the same rank, so the same width)."""
        from triton.backends.nvidia.driver import make_tensordesc_arg

        if not isinstance(desc, Desc):
            return make_tensordesc_arg(desc, meta)
        hit = self._expanded.get(desc.key)
        if hit is None:
            if len(self._expanded) >= CACHED_CALLS * 4:
                self._expanded.popitem(last=False)
            hit = self._expanded[desc.key] = make_tensordesc_arg(desc.descriptor, meta)
        return hit


class _Aligned:
    """An address inside the scratch buffer rounded up to the kernel's alignment (what Triton's
    launcher reads from an allocation: ``data_ptr()``)."""

    def __init__(self, ptr: int, alignment: int):
        self.ptr = -(-ptr // alignment) * alignment

    def data_ptr(self) -> int:
        return self.ptr


@functools.cache
def knobs():
    from triton import knobs as k

    return k.runtime


def _quiet() -> bool:
    """No profiler listens to launches: nothing to describe or call per launch."""
    hooks = knobs()
    return _idle(hooks.launch_enter_hook) and _idle(hooks.launch_exit_hook)


def _idle(hook) -> bool:
    """A launch hook that calls nothing (Triton 3.6 keeps an empty HookChain rather than None)."""
    return hook is None or not getattr(hook, "calls", True)


def _raw(value):
    return value.data_ptr() if hasattr(value, "data_ptr") and not isinstance(value, _Address) else value


class _Address:
    """A stand-in for a tensor in a TMA descriptor: its address and dtype only, so a cached
    descriptor keeps no tensor alive."""

    __slots__ = ("ptr", "dtype")

    def __init__(self, ptr: int, dtype):
        self.ptr, self.dtype = ptr, dtype

    def data_ptr(self) -> int:
        return self.ptr


class Desc:
    """A host TMA descriptor and the key that determines it (address, shape, leading stride, block)."""

    __slots__ = ("key", "descriptor")

    def __init__(self, key: tuple, descriptor):
        self.key, self.descriptor = key, descriptor


class Descriptors:
    """Host TMA descriptors of 2-D bf16 tensors with one block shape, by (address, shape)."""

    def __init__(self, block: tuple[int, int]):
        self.block = list(block)
        self._cache: OrderedDict[tuple, Desc] = OrderedDict()

    def __call__(self, t) -> Desc:
        key = (t.data_ptr(), t.shape[0], t.shape[1], t.stride(0), *self.block)
        hit = self._cache.get(key)
        if hit is None:
            from triton.tools.tensor_descriptor import TensorDescriptor

            if len(self._cache) >= CACHED_CALLS:
                self._cache.popitem(last=False)
            hit = self._cache[key] = Desc(key, TensorDescriptor(_Address(key[0], t.dtype), list(t.shape),
                                                                list(t.stride()), self.block))
        return hit


class Addresses:
    """The per-call address table (int64 [buffers x world], the kernel's ``bases``): the static
    heap addresses of every rank, with this rank's bound buffers at the call's tensors; and with
    ``shapes`` (rows, cols of each buffer id's bf16 matrix, None for other dtypes), the tensor maps
    of every slot (the kernel's ``maps``, :mod:`.tensormap`). The static slots' maps are built once;
    a call with new addresses builds only its bound buffers'. Cached by the bound addresses; a table
    used while a CUDA graph is captured is kept for good, since the graph reads it at every replay."""

    def __init__(self, static: np.ndarray, rank: int, world: int, device, shapes: list | None = None):
        from . import tensormap

        self.static, self.rank, self.world, self.device, self.shapes = static, rank, world, device, shapes
        # without shapes (the register path) a table of unmapped slots all the same: the accumulating copy
        # (fused._copy_add) looks every slot up to choose boxes or 1-D pieces on every path
        self.static_maps = tensormap.table([(int(a), *shapes[i // world]) if shapes and shapes[i // world] else (0, 0, 0)
                                            for i, a in enumerate(static)])
        self._cache: OrderedDict[tuple[int, ...], tuple] = OrderedDict()
        self._captured: dict[tuple[int, ...], tuple] = {}

    def __call__(self, ptrs: tuple[int, ...], capturing: bool):
        """The device tables (bases, maps) for ``ptrs`` (one per buffer id, 0 for heap buffers)."""
        hit = self._captured.get(ptrs) or self._cache.get(ptrs)
        if hit is None:
            import torch

            table, maps = self.tables(ptrs)
            if len(self._cache) >= CACHED_CALLS:
                self._cache.popitem(last=False)
            # pinned: no host sync, and legal inside graph capture
            host = torch.from_numpy(table).pin_memory(), torch.from_numpy(maps).pin_memory()
            hit = self._cache[ptrs] = (host, tuple(h.to(self.device, non_blocking=True) for h in host))
        if capturing:
            self._captured[ptrs] = hit
        return hit[1]

    def tables(self, ptrs: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """(bases, maps) on the host for ``ptrs``: the static ones with this rank's bound slots set,
        their maps encoded (the static slots' were, once)."""
        from . import tensormap

        table, maps = self.static.copy(), self.static_maps.copy()
        for bid, ptr in enumerate(ptrs):
            if ptr:
                slot = bid * self.world + self.rank
                table[slot] = ptr
                if self.shapes is not None:
                    maps[slot] = tensormap.table([(ptr, *self.shapes[bid]) if self.shapes[bid] else (0, 0, 0)])[0]
        return table, maps
