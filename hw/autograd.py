"""The backward of every PyTorch op, on either path, and the torch path as custom ops.

Each ``torch.ops.mkernel.*`` op (the fused path, :mod:`ops`) and its torch-path twin here
(``torch_gemm``, ``torch_ring_attention``: what autograd records and torch.compile traces when
the forward takes the torch path at world > 1) share one backward formula, registered with
``torch.library.register_autograd``:

- ``ag_gemm(a, b)``: grad a = ``gemm_rs(grad, b^T)``; grad b = all_gather(a)^T @ grad, with A
  *re-gathered* in the backward (a [M / world, K] is saved, not the gathered [M, K]: world times
  less memory held between forward and backward, for one more all-gather);
- ``gemm_rs(a, b)``: grad a = ``ag_gemm(grad, b^T)``; grad b = a^T @ all_gather(grad) (the torch
  path gathers grad once for both; the fused ag_gemm does not return its gathered rows, so
  with it grad is gathered a second time for grad b);
- ``gemm_ar(a, b)``: grad a = grad @ b^T, grad b = a^T @ grad, locally (grad is replicated);
- ``ring_attention``: K and V all-gathered, the exact attention backward
  (:func:`attention.attention_grads`) over every key with the causal zigzag mask, the K and V
  gradients reduce-scattered back to their owners. The same on both paths: a fused ring backward
  (K/V and their gradients passed around the ring while computing) is the next step;
- ``moe_dispatch_gemm``: the tokens re-dispatched (all-gathered, their rows picked) for grad w;
  grad x = each row's grad times its expert's w^T, summed per token and reduce-scattered back to
  the token's source rank (the combine). Torch ops only: no fused combine kernel exists yet.

A GEMM op's backward runs its dual op by the same rule, with the same mode, as a forward call
would (:mod:`dispatch`, through the public wrappers): the fused kernel where the rule picks it for
the dual's shape, the torch path otherwise. Only what the backward needs is saved: a for grad b,
b for grad a. Double backward is not supported.
"""
from __future__ import annotations

import functools

import torch

from . import ops  # noqa: F401 - defines the fused ops registered here
from .attention import attention_grads, fallback_ring_attention
from .collectives import all_gather, reduce_scatter
from .fallbacks import fallback_ag_gemm, fallback_gemm_ar, fallback_gemm_rs
from .groups import group_info

GEMM_OPS = ("gemm_ar", "gemm_rs", "ag_gemm")
_FALLBACK = {"gemm_ar": fallback_gemm_ar, "gemm_rs": fallback_gemm_rs, "ag_gemm": fallback_ag_gemm}


def _api():
    """The public wrappers (which import this module to register the formulas)."""
    from . import api

    return api


def out_rows(op: str, rows: int, world: int) -> int:
    return rows * world if op == "ag_gemm" else rows // world if op == "gemm_rs" else rows


# ---- the torch path as custom ops ----

@torch.library.custom_op("mkernel::torch_gemm", mutates_args=())
def _torch_gemm(a: torch.Tensor, b: torch.Tensor, op: str, group_name: str, gpus_per_node: int, sms: int,
                mode: str, transport: str = "auto") -> torch.Tensor:
    return _FALLBACK[op](a, b, group_name or None)


@_torch_gemm.register_fake
def _(a, b, op, group_name, gpus_per_node, sms, mode, transport="auto"):
    return a.new_empty(out_rows(op, a.shape[0], group_info(group_name or None).world), b.shape[1])


@torch.library.custom_op("mkernel::torch_ring_attention", mutates_args=())
def _torch_ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, group_name: str,
                          gpus_per_node: int, sms: int, mode: str,
                          transport: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    return fallback_ring_attention(q, k, v, group_name or None, causal=causal)


@_torch_ring_attention.register_fake
def _(q, k, v, causal, group_name, gpus_per_node, sms, mode, transport="auto"):
    return torch.empty_like(q), q.new_empty(q.shape[:3], dtype=torch.float32)


# ---- GEMM ops ----

@functools.cache
def _dual_path(op: str, a_shape: tuple, b_shape: tuple, group_name: str, gpus_per_node: int, mode: str) -> str:
    return _api()._traced_path(op, a_shape, b_shape, group_name, gpus_per_node, mode)


def _fused(op: str, x: torch.Tensor, y_shape: tuple, group_name: str, gpus_per_node: int, mode: str) -> bool:
    """Whether the rule sends the dual call ``op(x, y)`` to the fused kernel (which takes bf16 CUDA)."""
    if mode == "fallback" or x.dtype != torch.bfloat16 or not x.is_cuda:
        return False
    return _dual_path(op, tuple(x.shape), y_shape, group_name, gpus_per_node, mode) == "fused"


def _dual(op: str, x: torch.Tensor, y: torch.Tensor, group_name, gpus_per_node, sms, mode, transport) -> torch.Tensor:
    """The public ``op(x, y)`` with contiguous operands, as the fused kernel takes them."""
    return getattr(_api(), op)(x.contiguous(), y.contiguous(), group_name or None, gpus_per_node=gpus_per_node or None,
                               sms=sms or None, mode=mode, transport=transport)


def gemm_grads(op: str, a, b, grad, group_name: str, gpus_per_node: int, sms: int, mode: str,
               transport: str = "auto", need_a: bool = True,
               need_b: bool = True) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(grad a, grad b) of ``op(a, b)`` at ``grad`` (the module docstring has the formulas)."""
    g = group_info(group_name or None)
    grad_a = grad_b = None
    if op == "gemm_ar" or g.world == 1:
        return (grad @ b.t() if need_a else None), (a.t() @ grad if need_b else None)
    if op == "ag_gemm":
        if need_a:
            if _fused("gemm_rs", grad, (b.shape[1], b.shape[0]), group_name, gpus_per_node, mode):
                grad_a = _dual("gemm_rs", grad, b.t(), group_name, gpus_per_node, sms, mode, transport)
            else:
                grad_a = reduce_scatter(grad @ b.t(), g)
        if need_b:
            grad_b = all_gather(a, g).t() @ grad
        return grad_a, grad_b
    gathered = None
    if need_a:
        if _fused("ag_gemm", grad, (b.shape[1], b.shape[0]), group_name, gpus_per_node, mode):
            grad_a = _dual("ag_gemm", grad, b.t(), group_name, gpus_per_node, sms, mode, transport)
        else:
            gathered = all_gather(grad, g)
            grad_a = gathered @ b.t()
    if need_b:
        grad_b = a.t() @ (gathered if gathered is not None else all_gather(grad, g))
    return grad_a, grad_b


def _gemm_setup(ctx, a, b, op, call) -> None:
    ctx.op, ctx.call = op, call  # (group_name, gpus_per_node, sms, mode, transport)
    ctx.need = ctx.needs_input_grad[:2]
    ctx.save_for_backward(a if ctx.need[1] else None, b if ctx.need[0] else None)


def _gemm_backward(ctx, grad):
    a, b = ctx.saved_tensors
    return gemm_grads(ctx.op, a, b, grad, *ctx.call, need_a=ctx.need[0], need_b=ctx.need[1])


def _register_gemm(op: str) -> None:
    def setup(ctx, inputs, output):
        a, b, *call = inputs
        _gemm_setup(ctx, a, b, op, tuple(call))

    def backward(ctx, grad):
        return *_gemm_backward(ctx, grad), None, None, None, None, None

    torch.library.register_autograd(f"mkernel::{op}", backward, setup_context=setup)


def _torch_gemm_setup(ctx, inputs, output):
    a, b, op, *call = inputs
    _gemm_setup(ctx, a, b, op, tuple(call))


for _op in GEMM_OPS:
    _register_gemm(_op)
torch.library.register_autograd("mkernel::torch_gemm", lambda ctx, grad: (*_gemm_backward(ctx, grad),) + (None,) * 6,
                                setup_context=_torch_gemm_setup)


# ---- ring attention ----

def _seq_major(x: torch.Tensor) -> torch.Tensor:
    return x.permute(2, 0, 1, 3).contiguous()


def zigzag_mask(s: int, world: int, rank: int, causal: bool, device) -> torch.Tensor | None:
    """[S, world * S]: True where this rank's query row must not see a gathered key (rank-order
    rows). Causal: rank r holds chunks r and 2 world - 1 - r (its first S // 2 rows, then the
    rest); a query sees every key of an earlier chunk and, in its own chunk, those at or
    before its own index, as the torch path's merge does."""
    if not causal:
        return None
    half = s // 2
    i = torch.arange(s, device=device)
    inner = torch.where(i < half, i, i - half)  # index within the chunk

    def chunk(r):
        return torch.where(i < half, r, 2 * world - 1 - r)

    q_chunk, k_chunk = chunk(rank), torch.cat([chunk(r) for r in range(world)])
    k_inner = inner.repeat(world)
    earlier = k_chunk[None, :] < q_chunk[:, None]
    same = (k_chunk[None, :] == q_chunk[:, None]) & (k_inner[None, :] <= inner[:, None])
    return ~(earlier | same)


def ring_attention_grads(q, k, v, out, lse, dout, dlse, causal: bool, group_name: str):
    """(dq, dk, dv) of ``ring_attention``: K, V gathered, the exact attention backward over every
    key, the K and V gradients reduce-scattered back to their owners."""
    g = group_info(group_name or None)
    B, H, S, D = q.shape
    kk, vv = (all_gather(_seq_major(t), g).view(g.world * S, B, H, D).permute(1, 2, 0, 3) for t in (k, v))
    mask = zigzag_mask(S, g.world, g.rank, causal, q.device)
    dq, dkk, dvv = attention_grads(q, kk, vv, out, lse, dout, dlse, mask)
    dk, dv = (reduce_scatter(_seq_major(t), g).permute(1, 2, 0, 3).contiguous() for t in (dkk, dvv))
    return dq, dk, dv


def _attention_setup(ctx, inputs, output) -> None:
    q, k, v, ctx.causal, ctx.group_name = inputs[:5]
    ctx.save_for_backward(q, k, v, *output)


def _attention_backward(ctx, dout, dlse):
    q, k, v, out, lse = ctx.saved_tensors
    grads = ring_attention_grads(q, k, v, out, lse, dout, dlse, ctx.causal, ctx.group_name)
    return *grads, None, None, None, None, None, None


for _name in ("ring_attention", "torch_ring_attention"):
    torch.library.register_autograd(f"mkernel::{_name}", _attention_backward, setup_context=_attention_setup)


# ---- MoE ----

def moe_grads(handle, x, w, dy, need_x: bool = True, need_w: bool = True):
    """(grad x, grad w) of ``moe_dispatch_gemm(x, w, handle)`` at ``dy`` [rows, width]."""
    rows, g = handle.torch_rows, group_info(handle.group_name or None)
    h, o = rows.hidden, rows.offsets
    experts = range(len(o) - 1)
    dy_rows = dy.index_select(0, rows.dst)  # grouped by local expert, as rows.src
    grad_x = grad_w = None
    if need_w:
        picked = all_gather(x, g).index_select(0, rows.src)
        grad_w = torch.cat([picked[o[e]:o[e + 1]].t() @ dy_rows[o[e]:o[e + 1]] for e in experts])
    if need_x:
        d_picked = torch.cat([dy_rows[o[e]:o[e + 1]] @ w[e * h:(e + 1) * h].t() for e in experts])
        d_gathered = x.new_zeros(g.world * x.shape[0], x.shape[1]).index_add_(0, rows.src, d_picked)
        grad_x = reduce_scatter(d_gathered, g)
    return grad_x, grad_w


def _moe_setup(ctx, inputs, output) -> None:
    x, w, ctx.handle_id = inputs
    ctx.need = ctx.needs_input_grad[:2]
    ctx.save_for_backward(x, w)


def _moe_backward(ctx, dy):
    x, w = ctx.saved_tensors
    return *moe_grads(ops.handle(ctx.handle_id), x, w, dy, *ctx.need), None


torch.library.register_autograd("mkernel::moe_dispatch_gemm", _moe_backward, setup_context=_moe_setup)
