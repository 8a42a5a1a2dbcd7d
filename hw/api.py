"""The PyTorch API: ``torch.ops.mkernel.*`` custom ops with fake implementations, their Python
wrappers (a ProcessGroup or its name, like ``torch.ops.symm_mem``), and the unfused fallbacks.

Each fused op runs the op's schedule through a cached :class:`~mkernel.hw.executor.Executor`
(one per op, shape, group and topology; the first call on a shape is collective: every rank of
the group makes it, as with any symmetric-memory op). Ops enqueue on the current stream and never
synchronise the host. Each ``fallback_*`` computes the same result with torch collectives and
matmuls in float32: the reference the tests compare against, and the path to use where the fused
kernel cannot run.

Layouts follow the torch ops: ``gemm_ar(a [M, K_r], b [K_r, N]) -> [M, N]`` (sum over ranks);
``gemm_rs(a [M, K_r], b [K_r, N]) -> [M / world, N]`` (this rank's rows of the sum);
``ag_gemm(a [M / world, K], b [K, N_r]) -> [M, N_r]`` (the gathered rows times the local B);
``ring_attention(q, k, v [B, H, S_r, D], causal) -> (out [B, H, S_r, D], lse [B, H, S_r] fp32)``,
where with ``causal`` rank r holds the zigzag chunks r and 2 * world - 1 - r of the sequence;
``moe_dispatch_gemm(x [T_r, H], w [E_r * H, I], handle) -> [rows, I]`` with the handle of
:func:`moe_plan` (one per routing: the layout depends on every rank's routing).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
import torch.distributed as dist

from mkernel import builders
from mkernel.cluster import Cluster
from mkernel.errors import InputError
from mkernel.problems import Workload

from .context import Context
from .executor import Executor
from .safety import apply_no_multicast

_EXECUTORS: dict[tuple, tuple[Context, Executor]] = {}


def _group_name(group) -> str:
    if group is None:
        return dist.group.WORLD.group_name
    return group if isinstance(group, str) else group.group_name


def _group(name: str):
    from torch.distributed.distributed_c10d import _resolve_process_group

    return _resolve_process_group(name)


def _executor(w: Workload, group_name: str, gpus_per_node: int, sms: int) -> Executor:
    """The cached executor of (op, shape, group, topology), built collectively on first use.
    Empty or zero arguments mean the defaults: the world group, one node, every SM of the GPU
    (resolved here, inside the op, where torch.compile does not trace)."""
    group_name = group_name or _group_name(None)
    gpus_per_node = gpus_per_node or dist.get_world_size(_group(group_name))
    sms = sms or _device_sms()
    key = (w, group_name, gpus_per_node, sms)
    hit = _EXECUTORS.get(key)
    if hit is None:
        apply_no_multicast()
        world = dist.get_world_size(_group(group_name))
        if gpus_per_node < 1 or world % gpus_per_node:
            raise InputError(f"gpus_per_node={gpus_per_node} must divide the group's {world} ranks")
        c = Cluster("torch", world // gpus_per_node, gpus_per_node).with_sms(sms)
        schedule = builders.get(w.kernel).build(w, c)
        ctx = Context(group_name, gpus_per_node=gpus_per_node, send_bytes=0, **Executor.context_sizes(schedule))
        hit = _EXECUTORS[key] = (ctx, Executor(schedule, ctx))
    return hit[1]


@functools.cache
def _device_sms() -> int:
    return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count


def _check(name: str, *tensors: torch.Tensor) -> None:
    for i, t in enumerate(tensors):
        if t.dtype != torch.bfloat16 or not t.is_cuda or not t.is_contiguous():
            raise InputError(f"mkernel.{name}: argument {i} must be a contiguous bf16 CUDA tensor, got "
                             f"{t.dtype} on {t.device}{'' if t.is_contiguous() else ', not contiguous'}")


def _check_matmul(name: str, a: torch.Tensor, b: torch.Tensor) -> None:
    """Two 2-D operands with a common inner dimension, checked on each rank before any collective
    set-up: a rank with a wrong shape must fail alone, not leave its peers waiting in a rendezvous."""
    _check(name, a, b)
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise InputError(f"mkernel.{name}: a [M, K] and b [K, N] must be 2-D with one K, got "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")


# ---- custom ops (what torch.compile sees) ----

@torch.library.custom_op("mkernel::gemm_ar", mutates_args=())
def _gemm_ar(a: torch.Tensor, b: torch.Tensor, group_name: str, gpus_per_node: int, sms: int) -> torch.Tensor:
    w = Workload(kernel="gemm_ar", m=a.shape[0], n=b.shape[1], k=a.shape[1])
    return _executor(w, group_name, gpus_per_node, sms)({"A": a, "B": b})["OUT"]


@_gemm_ar.register_fake
def _(a, b, group_name, gpus_per_node, sms):
    return a.new_empty(a.shape[0], b.shape[1])


@torch.library.custom_op("mkernel::gemm_rs", mutates_args=())
def _gemm_rs(a: torch.Tensor, b: torch.Tensor, group_name: str, gpus_per_node: int, sms: int) -> torch.Tensor:
    w = Workload(kernel="gemm_rs", m=a.shape[0], n=b.shape[1], k=a.shape[1])
    return _executor(w, group_name, gpus_per_node, sms)({"A": a, "B": b})["OUT"]


@_gemm_rs.register_fake
def _(a, b, group_name, gpus_per_node, sms):
    return a.new_empty(a.shape[0] // dist.get_world_size(_group(group_name or _group_name(None))), b.shape[1])


@torch.library.custom_op("mkernel::ag_gemm", mutates_args=())
def _ag_gemm(a: torch.Tensor, b: torch.Tensor, group_name: str, gpus_per_node: int, sms: int) -> torch.Tensor:
    world = dist.get_world_size(_group(group_name or _group_name(None)))
    w = Workload(kernel="ag_gemm", m=a.shape[0] * world, n=b.shape[1], k=a.shape[1])
    return _executor(w, group_name, gpus_per_node, sms)({"A": a, "B": b})["OUT"]


@_ag_gemm.register_fake
def _(a, b, group_name, gpus_per_node, sms):
    return a.new_empty(a.shape[0] * dist.get_world_size(_group(group_name or _group_name(None))), b.shape[1])


@torch.library.custom_op("mkernel::ring_attention", mutates_args=())
def _ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, group_name: str,
                    gpus_per_node: int, sms: int) -> tuple[torch.Tensor, torch.Tensor]:
    B, H, S, D = q.shape
    w = Workload(kernel="ring_attention", m=S, n=B * H, k=D, causal=int(causal), tile_m=128)
    out = _executor(w, group_name, gpus_per_node, sms)({n: t.view(B * H * S, D) for n, t in zip("QKV", (q, k, v))})
    return out["OUT"].view(B, H, S, D), out["LSE"].view(B, H, S)


@_ring_attention.register_fake
def _(q, k, v, causal, group_name, gpus_per_node, sms):
    return q.new_empty(q.shape), q.new_empty(q.shape[:3], dtype=torch.float32)


# ---- MoE: the routing is planned once per routing, then reused (DeepEP-style handle) ----

@dataclass(frozen=True)
class MoeHandle:
    """One routing of every rank, planned: the executor's cache key and this rank's output rows.

    ``sources[i]`` = (source rank, source-local token, local expert) of output row i, or -1s for
    the zero rows that pad every rank to the largest row count; ``row_weights[i]`` the routing
    weight of that (token, expert) pair when weights were given (0 on padding rows)."""

    id: int
    workload: Workload
    group_name: str
    gpus_per_node: int
    sms: int
    sources: torch.Tensor  # int64 [rows, 3]
    row_weights: torch.Tensor | None  # float32 [rows]

    @property
    def rows(self) -> int:
        return self.sources.shape[0]


_HANDLES: dict[int, MoeHandle] = {}


def moe_plan(topk_idx: torch.Tensor, experts: int, hidden: int, width: int, group=None, *,
             topk_weights: torch.Tensor | None = None, gpus_per_node: int | None = None,
             sms: int | None = None) -> MoeHandle:
    """Plan MoE dispatch + grouped GEMM for one routing (collective; reads every rank's routing on
    the host, so do it once per routing, not per step). ``topk_idx``: this rank's [tokens, topk]
    expert ids; experts e live on rank e // (experts / world)."""
    from mkernel.routing import layout

    name, gpn, n_sms = _args(group, gpus_per_node, sms)
    name = name or _group_name(None)
    world = dist.get_world_size(_group(name))
    idx = _all_gather(topk_idx.to(torch.int64).contiguous(), name).view(world, *topk_idx.shape).cpu()
    w = Workload(kernel="moe_dispatch_gemm", m=topk_idx.shape[0] * world, n=width, k=hidden, experts=experts,
                 topk=topk_idx.shape[1], routes=tuple(tuple(map(tuple, r.tolist())) for r in idx))
    gpn = gpn or world
    segments, rows = layout(w, world // gpn, gpn)
    rank = dist.get_rank(_group(name))
    sources = torch.full((max(rows, 1), 3), -1, dtype=torch.int64)
    for seg in segments[rank]:
        for i, t in enumerate(seg.tokens):
            sources[seg.row0 + i] = torch.tensor([seg.source, t, seg.expert])
    row_weights = None
    if topk_weights is not None:
        weights = _all_gather(topk_weights.float().contiguous(), name).view(world, *topk_weights.shape).cpu()
        row_weights = torch.zeros(sources.shape[0])
        per_gpu = experts // world
        for i, (src, tok, j) in enumerate(sources.tolist()):
            if src >= 0:
                k = (idx[src, tok] == rank * per_gpu + j).nonzero()[0, 0]
                row_weights[i] = weights[src, tok, k]
        row_weights = row_weights.to(topk_idx.device)
    _executor(w, name, gpn, n_sms)  # plan and set up now (collective), not in the first call
    handle = MoeHandle(len(_HANDLES), w, name, gpn, n_sms, sources.to(topk_idx.device), row_weights)
    _HANDLES[handle.id] = handle
    return handle


@torch.library.custom_op("mkernel::moe_dispatch_gemm", mutates_args=())
def _moe_dispatch_gemm(x: torch.Tensor, w: torch.Tensor, handle: int) -> torch.Tensor:
    h = _HANDLES[handle]
    zero = torch.zeros(1, w.shape[1], device=w.device, dtype=w.dtype)
    return _executor(h.workload, h.group_name, h.gpus_per_node, h.sms)({"X": x, "W": w, "Z": zero})["Y"]


@_moe_dispatch_gemm.register_fake
def _(x, w, handle):
    return x.new_empty(_HANDLES[handle].rows, w.shape[1])


def moe_dispatch_gemm(x: torch.Tensor, w: torch.Tensor, handle: MoeHandle) -> torch.Tensor:
    """Dispatch this rank's tokens ``x`` [tokens, hidden] to their experts' ranks and run each
    rank's experts ``w`` [experts / world * hidden, width] (stacked) over the rows they receive:
    returns [handle.rows, width], row i for the (token, expert) pair ``handle.sources[i]``."""
    _check("moe_dispatch_gemm", x, w)  # shapes: the handle's executor refuses others before its launch
    return torch.ops.mkernel.moe_dispatch_gemm(x, w, handle.id)


# ---- the Python API ----

def _args(group, gpus_per_node: int | None, sms: int | None) -> tuple[str, int, int]:
    """Op arguments for the group (its name; "" for the world group), the node size and the SMs
    (0 for the defaults): plain values, so torch.compile traces the wrappers."""
    name = "" if group is None else group if isinstance(group, str) else group.group_name
    return name, gpus_per_node or 0, sms or 0


def gemm_ar(a: torch.Tensor, b: torch.Tensor, group=None, *, gpus_per_node: int | None = None,
            sms: int | None = None) -> torch.Tensor:
    """sum over the group of a_r @ b_r, on every rank. ``gpus_per_node`` (default: the whole group
    is one node) says which peers are reached by NVLink and which through the proxy."""
    _check_matmul("gemm_ar", a, b)
    return torch.ops.mkernel.gemm_ar(a, b, *_args(group, gpus_per_node, sms))


def gemm_rs(a: torch.Tensor, b: torch.Tensor, group=None, *, gpus_per_node: int | None = None,
            sms: int | None = None) -> torch.Tensor:
    """This rank's M / world rows of sum over the group of a_r @ b_r."""
    _check_matmul("gemm_rs", a, b)
    return torch.ops.mkernel.gemm_rs(a, b, *_args(group, gpus_per_node, sms))


def ag_gemm(a: torch.Tensor, b: torch.Tensor, group=None, *, gpus_per_node: int | None = None,
            sms: int | None = None) -> torch.Tensor:
    """all_gather(a) @ b: every rank's rows of A, in rank order, times this rank's B."""
    _check_matmul("ag_gemm", a, b)
    return torch.ops.mkernel.ag_gemm(a, b, *_args(group, gpus_per_node, sms))


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group=None, *, causal: bool = False,
                   gpus_per_node: int | None = None, sms: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of this rank's queries over every rank's keys and values: (out, lse)."""
    _check("ring_attention", q, k, v)
    if q.dim() != 4 or k.shape != q.shape or v.shape != q.shape:
        raise InputError(f"mkernel.ring_attention: q, k, v must share one [B, H, S, D] shape, got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    return torch.ops.mkernel.ring_attention(q, k, v, causal, *_args(group, gpus_per_node, sms))


# ---- fallbacks: torch collectives + float32 math (the tests' reference) ----

def _all_gather(x: torch.Tensor, group) -> torch.Tensor:
    """Rows of every rank in rank order (through the host when the group is gloo's)."""
    g = _group(_group_name(group))
    world = dist.get_world_size(g)
    host = dist.get_backend(g) == "gloo"
    src = x.cpu() if host else x
    out = src.new_empty((world * src.shape[0], *src.shape[1:]))
    dist.all_gather_into_tensor(out, src, group=g) if not host else dist.all_gather(list(out.chunk(world)), src,
                                                                                   group=g)
    return out.to(x.device)


def _all_reduce(x: torch.Tensor, group) -> torch.Tensor:
    g = _group(_group_name(group))
    host = dist.get_backend(g) == "gloo"
    y = x.cpu() if host else x.clone()
    dist.all_reduce(y, group=g)
    return y.to(x.device)


def fallback_gemm_ar(a, b, group=None):
    return _all_reduce(a.float() @ b.float(), group).to(a.dtype)


def fallback_gemm_rs(a, b, group=None):
    g = _group(_group_name(group))
    rows = a.shape[0] // dist.get_world_size(g)
    total = _all_reduce(a.float() @ b.float(), group)
    return total[dist.get_rank(g) * rows:(dist.get_rank(g) + 1) * rows].to(a.dtype).contiguous()


def fallback_ag_gemm(a, b, group=None):
    return (_all_gather(a, group).float() @ b.float()).to(a.dtype)


def fallback_ring_attention(q, k, v, group=None, *, causal: bool = False):
    """Every rank's keys and values gathered, attention in float32; zigzag positions when causal."""
    g = _group(_group_name(group))
    world, rank = dist.get_world_size(g), dist.get_rank(g)
    B, H, S, D = q.shape
    ks = _all_gather(k.permute(2, 0, 1, 3).contiguous(), group)  # [world * S, B, H, D]
    vs = _all_gather(v.permute(2, 0, 1, 3).contiguous(), group)
    kk, vv = (x.view(world * S, B, H, D).permute(1, 2, 0, 3).float() for x in (ks, vs))
    s = (q.float() @ kk.transpose(-1, -2)) / math.sqrt(D)
    if causal:
        half = S // 2

        def pos(r):
            i = torch.arange(S, device=q.device)
            return torch.where(i < half, r * half + i, (2 * world - 1 - r) * half + i - half)

        keys = torch.cat([pos(r) for r in range(world)])
        s = s.masked_fill(keys[None, None, None, :] > pos(rank)[None, None, :, None], float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    return (torch.softmax(s, dim=-1) @ vv).to(q.dtype), lse


def fallback_moe(x, w_local, workload: Workload, gpus_per_node: int, group=None):
    """MoE dispatch + grouped GEMM on torch: every rank's tokens gathered, then this rank's experts
    over the rows the routing sends them, in the layout of :mod:`mkernel.routing`."""
    from mkernel.routing import layout

    g = _group(_group_name(group))
    world, rank = dist.get_world_size(g), dist.get_rank(g)
    tokens = _all_gather(x, group).view(world, x.shape[0], x.shape[1])
    segments, rows = layout(workload, world // gpus_per_node, gpus_per_node)
    y = torch.zeros(max(rows, 1), w_local.shape[1], device=x.device, dtype=torch.float32)
    k = workload.k
    for s in segments[rank]:
        idx = torch.tensor(s.tokens, device=x.device)
        y[s.row0:s.row0 + len(s.tokens)] = tokens[s.source][idx].float() @ w_local[s.expert * k:(s.expert + 1) * k].float()
    return y.to(x.dtype)


def check() -> None:
    """Wait for every cached executor's calls and raise the first device, proxy or wait error. The
    ops enqueue without waiting for the GPU, so an error (a timed-out wait: that call's outputs are
    wrong) otherwise raises from the executor's next call, once the failed call has finished."""
    for _, ex in _EXECUTORS.values():
        ex.check()


def close() -> None:
    """Free every cached executor's symmetric memory and stop its proxy (collective)."""
    for ctx, _ in _EXECUTORS.values():
        ctx.close()
    _EXECUTORS.clear()
    _HANDLES.clear()
