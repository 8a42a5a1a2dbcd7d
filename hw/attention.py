"""Attention on torch: the torch path of ring attention, its float64 reference, and the kernels and
gradient they share.

:func:`attention_lse` runs torch's fastest kernel that also returns the log-sum-exp (cuDNN, else
flash, else plain math). Under autograd (or while torch.compile traces) it is a custom op whose
log-sum-exp has an exact gradient (:func:`attention_grads`): torch's fused attention kernels treat
it as a constant, which would break the zigzag merge's gradient.
"""
from __future__ import annotations

import math

import torch

from .collectives import all_gather, plain_all_gather, recorded
from .groups import group_info


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


def reference_ring_attention(q, k, v, group=None, *, causal: bool = False):
    """Every rank's keys and values gathered, attention in float64; zigzag positions when causal."""
    g = group_info(group)
    B, H, S, D = q.shape
    kk, vv = (plain_all_gather(x.permute(2, 0, 1, 3).contiguous(), g).view(g.world * S, B, H, D).permute(1, 2, 0, 3).double()
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
