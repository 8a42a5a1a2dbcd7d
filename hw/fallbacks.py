"""The unfused torch path of every op, and the float64 references the tests judge against.

``fallback_*`` is what a user would write without mkernel, at torch's speed: a bf16
``torch.matmul`` (cuBLAS) and NCCL collectives (the group's backend), and attention through torch's
fastest kernel that also returns the log-sum-exp (cuDNN, else flash, else plain math). It is
what ``mode="fallback"`` runs and what ``mode="auto"`` takes whenever the fused kernel would not be
faster (:mod:`dispatch`), at world 1 always.

``reference_*`` computes the same result in float64 (on the GPU): the oracle of the GPU tests.

Layouts are the ops' (:mod:`api`). A group with the gloo backend (emulated clusters: several
ranks on one GPU) moves its collectives through the host.

The torch paths are differentiable: under autograd (or while torch.compile traces) their
collectives are custom ops whose backward is the dual collective (:func:`all_gather`,
:func:`reduce_scatter`, :func:`all_reduce`, :func:`replicate`), and attention's log-sum-exp
has an exact gradient (:func:`attention_grads`; torch's fused attention kernels treat it as
a constant, which would break the zigzag merge's gradient). Without autograd they are the plain
in-place collectives and kernels.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.distributed as dist

from .groups import GroupInfo, group_info


def _all_gather(x: torch.Tensor, g: GroupInfo) -> torch.Tensor:
    """Rows of every rank in rank order."""
    if g.world == 1:
        return x
    src = x.cpu() if g.host else x.contiguous()
    out = src.new_empty((g.world * src.shape[0], *src.shape[1:]))
    if g.host:
        dist.all_gather(list(out.chunk(g.world)), src, group=g.pg)
    else:
        dist.all_gather_into_tensor(out, src, group=g.pg)
    return out.to(x.device)


def _all_reduce(x: torch.Tensor, g: GroupInfo) -> torch.Tensor:
    """The sum over ranks, in place where the collective runs on the GPU."""
    if g.world == 1:
        return x
    if g.host:
        y = x.cpu()
        dist.all_reduce(y, group=g.pg)
        return y.to(x.device)
    dist.all_reduce(x, group=g.pg)
    return x


def _reduce_scatter(x: torch.Tensor, g: GroupInfo) -> torch.Tensor:
    """This rank's rows of the sum over ranks."""
    if g.world == 1:
        return x
    rows = x.shape[0] // g.world
    if g.host:
        total = _all_reduce(x.cpu(), g)
        return total[g.rank * rows:(g.rank + 1) * rows].to(x.device).contiguous()
    out = x.new_empty((rows, *x.shape[1:]))
    dist.reduce_scatter_tensor(out, x, group=g.pg)
    return out


# ---- the same collectives, differentiable (the torch path under autograd and torch.compile) ----
#
# Custom ops, so torch.compile treats each as one opaque call (fake implementations give the
# shapes); the backward of each is its dual. An all-reduce's result is replicated and every rank
# computes the same loss from it (Megatron's convention), so its gradient passes through;
# ``replicate`` is the mirror image: a tensor every rank holds a copy of (a parameter) is used
# as is, and its gradient is summed over the ranks. Outputs never alias inputs (custom ops must
# not), hence the copies where the plain collective works in place.

def recorded(*tensors: torch.Tensor) -> bool:
    """Whether autograd records an op on these tensors, or torch.compile traces it."""
    return torch.compiler.is_compiling() or (torch.is_grad_enabled() and any(t.requires_grad for t in tensors))


@torch.library.custom_op("mkernel::all_gather", mutates_args=())
def _all_gather_op(x: torch.Tensor, group_name: str) -> torch.Tensor:
    out = _all_gather(x, group_info(group_name or None))
    return out.clone() if out is x else out


@_all_gather_op.register_fake
def _(x, group_name):
    return x.new_empty(group_info(group_name or None).world * x.shape[0], *x.shape[1:])


def _reduce_scatter_copy(x: torch.Tensor, g: GroupInfo) -> torch.Tensor:
    """:func:`_reduce_scatter` without touching ``x`` (on the host that one sums in place)."""
    return _reduce_scatter(x.clone() if g.host or g.world == 1 else x, g)


@torch.library.custom_op("mkernel::reduce_scatter", mutates_args=())
def _reduce_scatter_op(x: torch.Tensor, group_name: str) -> torch.Tensor:
    return _reduce_scatter_copy(x, group_info(group_name or None))


@_reduce_scatter_op.register_fake
def _(x, group_name):
    return x.new_empty(x.shape[0] // group_info(group_name or None).world, *x.shape[1:])


@torch.library.custom_op("mkernel::all_reduce", mutates_args=())
def _all_reduce_op(x: torch.Tensor, group_name: str) -> torch.Tensor:
    return _all_reduce(x.clone(), group_info(group_name or None))


@torch.library.custom_op("mkernel::replicate", mutates_args=())
def _replicate_op(x: torch.Tensor, group_name: str) -> torch.Tensor:
    return x.clone()


def _same_shape(x, group_name):
    return torch.empty_like(x)


_all_reduce_op.register_fake(_same_shape)
_replicate_op.register_fake(_same_shape)


def _keep_group(ctx, inputs, output) -> None:
    ctx.group_name = inputs[1]


torch.library.register_autograd("mkernel::all_gather", lambda ctx, grad: (reduce_scatter(grad, ctx.group_name), None),
                                setup_context=_keep_group)
torch.library.register_autograd("mkernel::reduce_scatter", lambda ctx, grad: (all_gather(grad, ctx.group_name), None),
                                setup_context=_keep_group)
torch.library.register_autograd("mkernel::all_reduce", lambda ctx, grad: (grad, None), setup_context=_keep_group)
torch.library.register_autograd("mkernel::replicate",  # summed in a copy: the incoming gradient may be another's too
                                lambda ctx, grad: (all_reduce(grad.clone(), ctx.group_name), None),
                                setup_context=_keep_group)


def _collective(op, plain, x: torch.Tensor, group) -> torch.Tensor:
    g = group_info(group)
    if g.world == 1:
        return x
    if recorded(x):
        return op(x.contiguous(), g.name)
    return plain(x.contiguous(), g)


def all_gather(x: torch.Tensor, group=None) -> torch.Tensor:
    """Rows of every rank in rank order; its gradient is reduce-scattered back to the rows' owners."""
    return _collective(torch.ops.mkernel.all_gather, _all_gather, x, group)


def reduce_scatter(x: torch.Tensor, group=None) -> torch.Tensor:
    """This rank's rows of the sum over ranks (``x`` left as it was); its gradient is all-gathered."""
    return _collective(torch.ops.mkernel.reduce_scatter, _reduce_scatter_copy, x, group)


def all_reduce(x: torch.Tensor, group=None) -> torch.Tensor:
    """The sum over ranks (in place on ``x`` without autograd); its gradient passes through."""
    return _collective(torch.ops.mkernel.all_reduce, _all_reduce, x, group)


def replicate(x: torch.Tensor, group=None) -> torch.Tensor:
    """``x`` itself, which every rank holds a copy of; its gradient is summed over the ranks."""
    g = group_info(group)
    return torch.ops.mkernel.replicate(x, g.name) if g.world > 1 and recorded(x) else x


# ---- the torch path ----

def fallback_gemm_ar(a: torch.Tensor, b: torch.Tensor, group=None) -> torch.Tensor:
    """sum over ranks of a_r @ b_r: torch.matmul, then an all-reduce."""
    return all_reduce(a @ b, group)


def fallback_gemm_rs(a: torch.Tensor, b: torch.Tensor, group=None) -> torch.Tensor:
    """This rank's M / world rows of sum over ranks of a_r @ b_r: a matmul, then a reduce-scatter."""
    return reduce_scatter(a @ b, group)


def fallback_ag_gemm(a: torch.Tensor, b: torch.Tensor, group=None) -> torch.Tensor:
    """all_gather(a) @ b: an all-gather, then a matmul."""
    return all_gather(a, group) @ b


def attention_lse(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(softmax(q k^T / sqrt(D)) v, log-sum-exp of its rows in float32 [B, H, S]) with torch's
    fastest kernel that returns the log-sum-exp: cuDNN (what ``scaled_dot_product_attention``
    picks on Hopper), else flash, else math. ``causal`` aligns the mask at the top left.
    Differentiable in both outputs (:func:`attention_grads`)."""
    if recorded(q, k, v):
        return torch.ops.mkernel.attention_lse(q, k, v, causal)
    aten = torch.ops.aten
    if q.is_cuda and q.dtype in (torch.bfloat16, torch.float16):
        for kernel in (_cudnn, _flash):
            try:
                return kernel(aten, q, k, v, causal)
            except (RuntimeError, AttributeError, NotImplementedError):
                continue
    s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return (torch.softmax(s, dim=-1) @ v.float()).to(q.dtype), torch.logsumexp(s, dim=-1)


def _cudnn(aten, q, k, v, causal):
    out, lse = aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, causal, False)[:2]
    return out, lse.reshape(q.shape[:3]).float()


def _flash(aten, q, k, v, causal):
    out, lse = aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal)[:2]
    return out, lse.float()


def attention_grads(q, k, v, out, lse, dout, dlse, mask: torch.Tensor | None = None,
                    rows: int = 1024) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients (dq, dk, dv) of ``(out, lse)`` = attention of q [B, H, Sq, D] over k, v [B, H, Sk, D]
    at (dout, dlse), from the forward's out and lse (no forward rerun). ``mask`` [Sq, Sk]: True
    where a query must not see a key. Exact, with the log-sum-exp's own gradient (the row's
    softmax, times dlse), which torch's fused attention kernels drop; in float32 (float64 inputs:
    float64), ``rows`` queries at a time, so the probabilities held are [B, H, rows, Sk].

    The usual identities: P = exp(q k^T / sqrt(D) - lse), dv = P^T dout, ds = P (dout v^T - delta)
    with delta = rowsum(dout * out) - dlse, dq = ds k / sqrt(D), dk = ds^T q / sqrt(D)."""
    ct = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(q.shape[-1])
    kf, vf = k.to(ct), v.to(ct)
    dq = torch.empty(q.shape, dtype=ct, device=q.device)
    dk, dv = torch.zeros_like(kf), torch.zeros_like(vf)
    for i in range(0, q.shape[2], rows):
        sl = slice(i, i + rows)
        qf, g = q[:, :, sl].to(ct), dout[:, :, sl].to(ct)
        p = torch.exp(qf @ kf.transpose(-1, -2) * scale - lse[:, :, sl, None].to(ct))
        if mask is not None:
            p = p.masked_fill(mask[sl], 0.0)
        dv += p.transpose(-1, -2) @ g
        delta = (g * out[:, :, sl].to(ct)).sum(-1, keepdim=True)
        if dlse is not None:
            delta = delta - dlse[:, :, sl, None].to(ct)
        ds = p * (g @ vf.transpose(-1, -2) - delta)
        dq[:, :, sl] = ds @ kf * scale
        dk += ds.transpose(-1, -2) @ qf * scale
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def causal_mask(sq: int, sk: int, device) -> torch.Tensor:
    """The top-left aligned causal mask [sq, sk] (True: hidden), as ``attention_lse`` applies it."""
    return torch.ones(sq, sk, dtype=torch.bool, device=device).triu(1)


@torch.library.custom_op("mkernel::attention_lse", mutates_args=())
def _attention_lse_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return attention_lse(q, k, v, causal)  # autograd is off inside: the kernels


@_attention_lse_op.register_fake
def _(q, k, v, causal):
    return torch.empty_like(q), q.new_empty(q.shape[:3], dtype=torch.float32)


def _attention_setup(ctx, inputs, output) -> None:
    q, k, v, ctx.causal = inputs
    ctx.save_for_backward(q, k, v, *output)


def _attention_backward(ctx, dout, dlse):
    q, k, v, out, lse = ctx.saved_tensors
    mask = causal_mask(q.shape[2], k.shape[2], q.device) if ctx.causal else None
    return (*attention_grads(q, k, v, out, lse, dout, dlse, mask), None)


torch.library.register_autograd("mkernel::attention_lse", _attention_backward, setup_context=_attention_setup)


def _merge(parts: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention over the union of disjoint key sets, from each set's (out, lse)."""
    lse = torch.logsumexp(torch.stack([p[1] for p in parts]), dim=0)
    out = sum(p[0].float() * torch.exp(p[1] - lse).unsqueeze(-1) for p in parts)
    return out.to(parts[0][0].dtype), lse


def fallback_ring_attention(q, k, v, group=None, *, causal: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Every rank's keys and values gathered, then attention. Causal: rank r holds the zigzag
    chunks r and 2 world - 1 - r of the sequence, so each of its two query halves attends to the
    whole chunks before it and, causally, to its own chunk (two kernels, merged by lse)."""
    g = group_info(group)
    if g.world == 1:
        return attention_lse(q, k, v, causal)
    B, H, S, D = q.shape
    kk, vv = (all_gather(x.permute(2, 0, 1, 3).contiguous(), g).view(g.world * S, B, H, D).permute(1, 2, 0, 3)
              for x in (k, v))
    if not causal:
        return attention_lse(q, kk.contiguous(), vv.contiguous(), False)
    half = S // 2
    # chunk c of the sequence lives on rank c (first half) or rank 2 world - 1 - c (second half)
    chunks = [None] * (2 * g.world)
    for r in range(g.world):
        chunks[r] = (kk[:, :, r * S:r * S + half], vv[:, :, r * S:r * S + half])
        chunks[2 * g.world - 1 - r] = (kk[:, :, r * S + half:(r + 1) * S], vv[:, :, r * S + half:(r + 1) * S])
    outs, lses = [], []
    for c, rows in ((g.rank, slice(0, half)), (2 * g.world - 1 - g.rank, slice(half, S))):
        qc = q[:, :, rows].contiguous()
        parts = [attention_lse(qc, chunks[c][0].contiguous(), chunks[c][1].contiguous(), True)]
        if c:
            before_k = torch.cat([chunks[i][0] for i in range(c)], dim=2).contiguous()
            before_v = torch.cat([chunks[i][1] for i in range(c)], dim=2).contiguous()
            parts.append(attention_lse(qc, before_k, before_v, False))
        o, lse = _merge(parts) if len(parts) > 1 else parts[0]
        outs.append(o)
        lses.append(lse)
    return torch.cat(outs, dim=2), torch.cat(lses, dim=2)


@dataclass(frozen=True)
class MoeRows:
    """Where this rank's MoE output rows come from, grouped by local expert: output row ``dst[i]``
    is gathered token ``src[i]`` (source rank x tokens per rank + token) times expert e's weights,
    for i in [offsets[e], offsets[e + 1]); the other rows (padding) are zero. Index tensors are on
    the GPU and built once per routing, so a call neither synchronises nor builds an index."""

    rows: int
    hidden: int
    src: torch.Tensor  # int64 [n]
    dst: torch.Tensor  # int64 [n]
    offsets: tuple[int, ...]  # experts + 1 boundaries into src and dst


def moe_sources(w, rank: int, nodes: int, gpus_per_node: int) -> torch.Tensor:
    """int64 [rows, 3]: (source rank, source-local token, local expert) of each of ``rank``'s MoE
    output rows in the fused op's layout (:mod:`mkernel.routing`), -1s for padding rows."""
    from mkernel.routing import layout

    segments, rows = layout(w, nodes, gpus_per_node)
    sources = torch.full((max(rows, 1), 3), -1, dtype=torch.int64)
    for seg in segments[rank]:  # one slice per segment, not one tensor per token
        n = len(seg.tokens)
        sources[seg.row0:seg.row0 + n, 0] = seg.source
        sources[seg.row0:seg.row0 + n, 1] = torch.as_tensor(seg.tokens, dtype=torch.int64)
        sources[seg.row0:seg.row0 + n, 2] = seg.expert
    return sources


def moe_rows(sources: torch.Tensor, tokens: int, hidden: int, experts: int, device) -> MoeRows:
    """The torch path's gather and scatter indices for ``sources`` (:func:`moe_sources`), grouped by
    local expert (``experts`` of them on this rank, ``tokens`` per rank)."""
    real = sources[:, 0] >= 0
    dst = torch.nonzero(real).flatten()
    src = sources[real, 0] * tokens + sources[real, 1]
    expert = sources[real, 2]
    order = torch.argsort(expert, stable=True)
    offsets = (0, *torch.bincount(expert, minlength=experts).cumsum(0).tolist())
    return MoeRows(sources.shape[0], hidden, src[order].to(device), dst[order].to(device), tuple(offsets))


def fallback_moe(x: torch.Tensor, w: torch.Tensor, plan: MoeRows, group=None) -> torch.Tensor:
    """MoE dispatch + grouped GEMM on torch: every rank's tokens gathered, the rows this rank's
    experts receive picked, and each local expert's bf16 matmul over its rows."""
    picked = all_gather(x, group).index_select(0, plan.src)
    h, o = plan.hidden, plan.offsets
    y = torch.zeros(plan.rows, w.shape[1], device=x.device, dtype=x.dtype)
    outs = [picked[o[e]:o[e + 1]] @ w[e * h:(e + 1) * h] for e in range(len(o) - 1)]
    return y.index_copy_(0, plan.dst, torch.cat(outs)) if outs else y


# ---- float64 references (the GPU tests' oracle) ----

def reference_gemm_ar(a, b, group=None):
    return _all_reduce(a.double() @ b.double(), group_info(group))


def reference_gemm_rs(a, b, group=None):
    return _reduce_scatter(a.double() @ b.double(), group_info(group))


def reference_ag_gemm(a, b, group=None):
    return _all_gather(a, group_info(group)).double() @ b.double()


def reference_ring_attention(q, k, v, group=None, *, causal: bool = False):
    """Every rank's keys and values gathered, attention in float64; zigzag positions when causal."""
    g = group_info(group)
    B, H, S, D = q.shape
    kk, vv = (_all_gather(x.permute(2, 0, 1, 3).contiguous(), g).view(g.world * S, B, H, D).permute(1, 2, 0, 3).double()
              for x in (k, v))
    s = (q.double() @ kk.transpose(-1, -2)) / math.sqrt(D)
    if causal:
        half = S // 2

        def pos(r):
            i = torch.arange(S, device=q.device)
            return torch.where(i < half, r * half + i, (2 * g.world - 1 - r) * half + i - half)

        keys = torch.cat([pos(r) for r in range(g.world)])
        s = s.masked_fill(keys[None, None, None, :] > pos(g.rank)[None, None, :, None], float("-inf"))
    return torch.softmax(s, dim=-1) @ vv, torch.logsumexp(s, dim=-1)


def reference_moe(x, w, plan: MoeRows, group=None):
    """:func:`fallback_moe` in float64."""
    picked = _all_gather(x, group_info(group)).double().index_select(0, plan.src)
    h, o = plan.hidden, plan.offsets
    y = torch.zeros(plan.rows, w.shape[1], device=x.device, dtype=torch.float64)
    for e in range(len(o) - 1):
        y.index_copy_(0, plan.dst[o[e]:o[e + 1]], picked[o[e]:o[e + 1]] @ w[e * h:(e + 1) * h].double())
    return y
