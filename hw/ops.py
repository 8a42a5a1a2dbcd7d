"""The fused path of the PyTorch ops: ``torch.ops.mkernel.*`` custom ops (with fake
implementations, so torch.compile traces them), the executors they run, and MoE routing handles.

Each op runs its schedule through a cached :class:`~mkernel.hw.runtime.executor.Executor`, one per op,
shape, group and topology, built collectively on first use (every rank of the group makes that
call, as with any symmetric-memory op). The public wrappers (:mod:`api`) call an executor directly
in eager mode; the custom ops are what torch.compile and autograd see. ``mode`` (the call's, default
"auto") does not change the forward, which is always fused here: the backward (:mod:`autograd`)
runs its dual ops by the rule under that mode.
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import torch

from mkernel import builders
from mkernel.cluster import Cluster
from mkernel.errors import InputError
from mkernel.problems import Workload

from .dispatch import Decision
from .fallbacks import MoeRows
from .groups import group_info
from .knobs import DEFAULTS, HwKnobs
from .runtime.context import Context
from .runtime.executor import Executor
from .runtime.safety import apply_no_multicast

_EXECUTORS: dict[tuple, tuple[Context, Executor]] = {}
_KNOBS = [DEFAULTS]  # the runtime knobs of the executors built from now on (configure)


def configure(knobs: HwKnobs) -> None:
    """The runtime knobs (timeouts, ring capacity, data path, ...: :class:`~mkernel.hw.knobs.HwKnobs`)
    of every executor this process builds from now on. Before the first fused call, or after
    :func:`close`: executors keep the knobs they were built with, and ranks of one group must agree."""
    if not isinstance(knobs, HwKnobs):
        raise InputError(f"configure(knobs): an HwKnobs is needed, got {type(knobs).__name__}")
    if _EXECUTORS:
        raise InputError(f"configure(): {len(_EXECUTORS)} executors already run with the knobs they were built "
                         f"with; call mkernel.close() first (collective), then configure()")
    _KNOBS[0] = knobs


def executor(w: Workload, group_name: str, gpus_per_node: int, sms: int, transport: str = "auto") -> Executor:
    """The cached executor of (op, shape, group, topology, transport), built collectively on first
    use. Empty or zero arguments mean the defaults: the world group, one node, every SM of the GPU.
    ``transport`` reaches the other nodes (:class:`~mkernel.hw.runtime.context.Context`; ``auto``:
    what ``mkernel doctor`` picks here: a NIC's transport, else the loopback of one host)."""
    g = group_info(group_name or None)
    if g.pg is None:
        raise InputError(f"mkernel.{w.kernel}: the fused kernel needs torch.distributed initialised (its buffers are "
                         f"symmetric memory), even at world 1; call torch.distributed.init_process_group first, or "
                         f"use mode='auto' or 'fallback'")
    gpus_per_node = gpus_per_node or g.world
    sms = sms or device_sms()
    key = (w, g.name, gpus_per_node, sms, transport)
    hit = _EXECUTORS.get(key)
    if hit is None:
        apply_no_multicast()
        if gpus_per_node < 1 or g.world % gpus_per_node:
            raise InputError(f"gpus_per_node={gpus_per_node} must divide the group's {g.world} ranks")
        c = Cluster("torch", g.world // gpus_per_node, gpus_per_node).with_sms(sms)
        schedule = builders.get(w.kernel).build(w, c)
        ctx = Context(g.pg, gpus_per_node=gpus_per_node, send_bytes=0, transport=transport, knobs=_KNOBS[0],
                      **Executor.context_sizes(schedule))
        hit = _EXECUTORS[key] = (ctx, Executor(schedule, ctx))
    return hit[1]


@functools.cache
def device_sms() -> int:
    return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count


def _world(group_name: str) -> int:
    return group_info(group_name or None).world


# ---- custom ops (what torch.compile and autograd see) ----

@torch.library.custom_op("mkernel::gemm_ar", mutates_args=())
def _gemm_ar(a: torch.Tensor, b: torch.Tensor, group_name: str, gpus_per_node: int, sms: int,
             mode: str = "auto", transport: str = "auto") -> torch.Tensor:
    w = Workload(kernel="gemm_ar", m=a.shape[0], n=b.shape[1], k=a.shape[1])
    return executor(w, group_name, gpus_per_node, sms, transport)({"A": a, "B": b})["OUT"]


@_gemm_ar.register_fake
def _(a, b, group_name, gpus_per_node, sms, mode="auto", transport="auto"):
    return a.new_empty(a.shape[0], b.shape[1])


@torch.library.custom_op("mkernel::gemm_rs", mutates_args=())
def _gemm_rs(a: torch.Tensor, b: torch.Tensor, group_name: str, gpus_per_node: int, sms: int,
             mode: str = "auto", transport: str = "auto") -> torch.Tensor:
    w = Workload(kernel="gemm_rs", m=a.shape[0], n=b.shape[1], k=a.shape[1])
    return executor(w, group_name, gpus_per_node, sms, transport)({"A": a, "B": b})["OUT"]


@_gemm_rs.register_fake
def _(a, b, group_name, gpus_per_node, sms, mode="auto", transport="auto"):
    return a.new_empty(a.shape[0] // _world(group_name), b.shape[1])


@torch.library.custom_op("mkernel::ag_gemm", mutates_args=())
def _ag_gemm(a: torch.Tensor, b: torch.Tensor, group_name: str, gpus_per_node: int, sms: int,
             mode: str = "auto", transport: str = "auto") -> torch.Tensor:
    w = Workload(kernel="ag_gemm", m=a.shape[0] * _world(group_name), n=b.shape[1], k=a.shape[1])
    return executor(w, group_name, gpus_per_node, sms, transport)({"A": a, "B": b})["OUT"]


@_ag_gemm.register_fake
def _(a, b, group_name, gpus_per_node, sms, mode="auto", transport="auto"):
    return a.new_empty(a.shape[0] * _world(group_name), b.shape[1])


def attention_workload(q: torch.Tensor, causal: bool) -> Workload:
    B, H, S, D = q.shape
    return Workload(kernel="ring_attention", m=S, n=B * H, k=D, causal=int(causal), tile_m=128)


@torch.library.custom_op("mkernel::ring_attention", mutates_args=())
def _ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, group_name: str,
                    gpus_per_node: int, sms: int, mode: str = "auto",
                    transport: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    return run_attention(executor(attention_workload(q, causal), group_name, gpus_per_node, sms, transport), q, k, v)


def run_attention(ex: Executor, q, k, v) -> tuple[torch.Tensor, torch.Tensor]:
    B, H, S, D = q.shape
    out = ex({"Q": q.view(B * H * S, D), "K": k.view(B * H * S, D), "V": v.view(B * H * S, D)})
    return out["OUT"].view(B, H, S, D), out["LSE"].view(B, H, S)


@_ring_attention.register_fake
def _(q, k, v, causal, group_name, gpus_per_node, sms, mode="auto", transport="auto"):
    return q.new_empty(q.shape), q.new_empty(q.shape[:3], dtype=torch.float32)


# ---- MoE: the routing is planned once per routing, then reused (DeepEP-style handle) ----

@dataclass(frozen=True)
class MoeHandle:
    """One routing of every rank, planned: its workload, the path its calls take, this rank's
    output rows, and how the torch path builds them.

    ``sources[i]`` = (source rank, source-local token, local expert) of output row i, or -1s for
    the zero rows that pad every rank to the largest row count; ``row_weights[i]`` the routing
    weight of that (token, expert) pair when weights were given (0 on padding rows)."""

    id: int
    workload: Workload
    group_name: str
    gpus_per_node: int
    sms: int
    transport: str
    sources: torch.Tensor  # int64 [rows, 3]
    row_weights: torch.Tensor | None  # float32 [rows]
    decision: Decision
    torch_rows: MoeRows

    @property
    def rows(self) -> int:
        return self.sources.shape[0]


_HANDLES: dict[int, MoeHandle] = {}
_HANDLE_IDS = itertools.count()  # never reused, so a handle kept across close() cannot alias a new one


def register(handle_fields: dict) -> MoeHandle:
    handle = MoeHandle(id=next(_HANDLE_IDS), **handle_fields)
    _HANDLES[handle.id] = handle
    return handle


def handle(handle_id: int) -> MoeHandle:
    hit = _HANDLES.get(handle_id)
    if hit is None:
        raise InputError(f"MoE handle {handle_id} is not live (mkernel.close() drops every handle); plan the "
                         f"routing again with mkernel.moe_plan")
    return hit


_MOE_RUNS: dict[int, tuple[Executor, torch.Tensor]] = {}  # handle id -> its executor and the zero row it reads


def run_moe(h: MoeHandle, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """One fused call of a handle's routing. Its executor and zero row are looked up once per handle:
    the executor cache's key holds the whole routing, which costs a hash of every (token, expert)
    route to look up."""
    hit = _MOE_RUNS.get(h.id)
    if hit is None:
        hit = _MOE_RUNS[h.id] = (executor(h.workload, h.group_name, h.gpus_per_node, h.sms, h.transport),
                                 torch.zeros(1, w.shape[1], device=w.device, dtype=w.dtype))
    ex, zero = hit
    return ex({"X": x, "W": w, "Z": zero})["Y"]


@torch.library.custom_op("mkernel::moe_dispatch_gemm", mutates_args=())
def _moe_dispatch_gemm(x: torch.Tensor, w: torch.Tensor, handle_id: int) -> torch.Tensor:
    return run_moe(handle(handle_id), x, w)


@_moe_dispatch_gemm.register_fake
def _(x, w, handle_id):
    return x.new_empty(handle(handle_id).rows, w.shape[1])


def check() -> None:
    """Wait for every cached executor's calls and raise the first device, proxy or wait error."""
    for _, ex in _EXECUTORS.values():
        ex.check()


def close() -> None:
    """Free every cached executor's symmetric memory and stop its proxy (collective)."""
    for ctx, _ in _EXECUTORS.values():
        ctx.close()
    _EXECUTORS.clear()
    _HANDLES.clear()
    _MOE_RUNS.clear()
