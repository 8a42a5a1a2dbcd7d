"""What a call of an :class:`~mkernel.hw.runtime.executor.Executor` binds: this rank's tensors,
checked against the schedule's buffers, and the two per-call kernel arguments built from them, the
address table and the GEMM operands' TMA descriptors.

Where a buffer lives is the plan's choice (:class:`~mkernel.hw.lowering.remote.Placement`): a *heap*
buffer sits in the symmetric heap at the same offset on every rank (this module keeps a tensor view
of this rank's copy: inputs are staged into it, outputs copied out of it); a *bound* buffer is the
call's tensor (an input used in place, a fresh output) or plan-owned scratch allocated here once.
The address table holds every rank's heap addresses, built once, with this rank's bound buffers at
the call's tensors. Calls that reuse their tensors (training steps, benchmarks, graph replays) find
both the table and the descriptors cached by the tensors' addresses and build nothing.
"""
from __future__ import annotations

import collections

import numpy as np

from mkernel.errors import InputError
from mkernel.ir import BufferKind, Schedule

from ..lowering.plan import GEMM_TILE, Plan
from .launch import CACHED_CALLS, Addresses, Descriptors

TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def torch_dtype(name: str):
    import torch

    return getattr(torch, TORCH_DTYPES[name])


class Bindings:
    """One rank's buffers of one plan, on the context's device: heap views, scratch, the static
    address table and the descriptor caches, built once; :meth:`check` and :meth:`bind` take a
    call's tensors, :meth:`arguments` turns them into the kernel's per-call arguments."""

    def __init__(self, schedule: Schedule, plan: Plan, ctx):
        import torch

        p, dev = plan, ctx.device
        self.kernel = schedule.kernel
        self.device = dev
        self.buffers = {b.name: b for b in schedule.buffers}
        # heap buffers: a view of this rank's copy, and every rank's address in the bases table
        heap = ctx.recv
        self.heap_views = {}
        bases = np.zeros(len(p.buffers) * p.world, dtype=np.int64)
        recv_ptrs = ctx.recv_ptrs.cpu().numpy()
        for bid, name in enumerate(p.buffers):
            if name in p.placement.heap:
                off, b = p.placement.heap[name], self.buffers[name]
                nbytes = b.rows * b.cols * b.itemsize
                self.heap_views[name] = heap[off:off + nbytes].view(torch_dtype(b.dtype)).view(b.rows, b.cols)
                bases[bid * p.world: (bid + 1) * p.world] = recv_ptrs + off
        # the tensor maps of bf16 buffers, for the bulk path's box copies (none on the register path)
        shapes = None if ctx.knobs.data_path == "register" else [
            (self.buffers[n].rows, self.buffers[n].cols) if self.buffers[n].dtype == "bf16" else None for n in p.buffers]
        self.addresses = Addresses(bases, p.rank, p.world, dev, shapes)
        # plan-owned scratch that no peer touches: allocated once
        self.scratch = {name: torch.empty(self.buffers[name].rows, self.buffers[name].cols,
                                          dtype=torch_dtype(self.buffers[name].dtype), device=dev)
                        for name in p.placement.bound if self.buffers[name].kind is BufferKind.SCRATCH}
        self.inputs = tuple(b.name for b in schedule.buffers if b.kind is BufferKind.INPUT)
        self.outputs = tuple(b.name for b in schedule.buffers if b.kind is BufferKind.OUTPUT)
        # what a call checks and binds, in buffer-id order: (id, name, kind, shape, dtype)
        self._inputs = tuple((name, (self.buffers[name].rows, self.buffers[name].cols),
                              torch_dtype(self.buffers[name].dtype)) for name in self.inputs)
        self._bound = tuple((p.buffers.index(name), name, self.buffers[name].kind,
                             (self.buffers[name].rows, self.buffers[name].cols), torch_dtype(self.buffers[name].dtype))
                            for name in p.placement.bound)
        self._no_ptrs = (0,) * len(p.buffers)
        self.stage = tuple(n for n in self.inputs if n in p.placement.heap)  # inputs peers read: copied in
        self.heap_outputs = tuple(n for n in self.outputs if n in self.heap_views)  # copied out
        self.head_dim = next((self.buffers[n].cols for n in ("Q",) if n in self.buffers), 64)
        self.gemm_ab = p.gemm_operands
        # the buffer id of the second A operand (AllGather+GEMM's gathered rows), or -1
        self.a2_buf = p.buffers.index(self.gemm_ab[0][1]) if self.gemm_ab and len(self.gemm_ab[0]) > 1 else -1
        bm, bn, bk = GEMM_TILE  # the kernel's BM, BN, BK (fused.constexprs)
        self._dummy = torch.zeros(256, 256, dtype=torch.bfloat16, device=dev)  # descriptors' stand-in
        self._a_descs = Descriptors((bm, bk))
        self._b_descs = Descriptors((bk, bn))
        self._c_descs = Descriptors((bm, bn))
        self._gemm_c = p.gemm_c
        self._call_descs: collections.OrderedDict[tuple[int, ...], dict] = collections.OrderedDict()

    def check(self, inputs: dict) -> None:
        """Raise InputError unless every input is this rank's tensor of its buffer's shape and dtype,
        contiguous, on this GPU."""
        dev = self.device
        for name, want, dt in self._inputs:
            x = inputs.get(name)
            if x is None or x.shape != want or x.dtype != dt or x.get_device() != dev.index or not x.is_contiguous():
                got = "nothing" if x is None else f"{tuple(x.shape)} {x.dtype} on {x.device}" + (
                    "" if x.is_contiguous() else ", not contiguous")
                raise InputError(f"{self.kernel} input {name}: expected a contiguous {want} {dt} tensor "
                                 f"on {dev}, got {got}")

    def bind(self, inputs: dict, out: dict) -> tuple[dict, tuple[int, ...]]:
        """The call's tensor of every bound buffer (outputs missing from ``out`` are allocated into
        it) and their addresses by buffer id (0 for heap buffers): the key of the call's arguments."""
        import torch

        bound, ptrs = {}, list(self._no_ptrs)
        for bid, name, kind, shape, dt in self._bound:
            if kind is BufferKind.INPUT:
                t = inputs[name]
            elif kind is BufferKind.OUTPUT:
                t = out.get(name)
                if t is None:
                    t = out[name] = torch.empty(shape, device=self.device, dtype=dt)
            else:
                t = self.scratch[name]
            bound[name] = t
            ptrs[bid] = t.data_ptr()
        return bound, tuple(ptrs)

    def arguments(self, bound: dict, key: tuple[int, ...], capturing: bool) -> dict:
        """The kernel's per-call arguments for :meth:`bind`'s result: the address table (``bases``), the
        tensor maps (``maps``) and the four GEMM descriptors, from the caches where the same addresses
        were bound before."""
        descs = self._call_descs.get(key)  # the bound tensors' addresses fix the address table and every descriptor
        if descs is None:
            if len(self._call_descs) >= CACHED_CALLS:
                self._call_descs.popitem(last=False)
            descs = self._call_descs[key] = self._descriptors(bound)
        bases, maps = self.addresses(key, capturing)
        return {"bases": bases, "maps": maps, **descs}

    def _descriptors(self, bound: dict) -> dict:
        """Host TMA descriptors of the GEMM operands: A, the second A (A again where there is none),
        B, and the GEMM table's C; stand-ins for a kernel without GEMMs (or without a table)."""
        a = a2 = b = c = self._dummy
        if self.gemm_ab is not None:
            a_names, b_name = self.gemm_ab  # one A or two: the second A is A itself where there is one
            a, a2, b = (bound.get(n, self.heap_views.get(n)) for n in (a_names[0], a_names[-1], b_name))
        if self._gemm_c is not None:
            c = bound.get(self._gemm_c, self.heap_views.get(self._gemm_c))
        return {"a_host": self._a_descs(a), "a2_host": self._a_descs(a2), "b_host": self._b_descs(b),
                "c_host": self._c_descs(c)}
