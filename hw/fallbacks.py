"""The unfused torch path of every op, and the float64 references the tests judge against.

``fallback_*`` is what a user would write without mkernel, at torch's speed: a bf16
``torch.matmul`` (cuBLAS) and NCCL collectives (the group's backend, :mod:`collectives`), and
attention through torch's fastest kernel that also returns the log-sum-exp (:mod:`attention`). It
is what ``mode="fallback"`` runs and what ``mode="auto"`` takes whenever the fused kernel would not
be faster (:mod:`dispatch`), at world 1 always.

``reference_*`` computes the same result in float64 (on the GPU): the oracle of the GPU tests.
Both sets are named here for every op; ring attention's live in :mod:`attention`.

Layouts are the ops' (:mod:`api`). The torch paths are differentiable: their collectives are the
differentiable ones of :mod:`collectives`, and attention's log-sum-exp has an exact gradient.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

from .attention import fallback_ring_attention, reference_ring_attention  # noqa: F401 - every op's pair, here
from .collectives import all_gather, all_reduce, plain_all_gather, plain_all_reduce, plain_reduce_scatter, \
    reduce_scatter
from .groups import group_info


def fallback_gemm_ar(a: torch.Tensor, b: torch.Tensor, group=None) -> torch.Tensor:
    """sum over ranks of a_r @ b_r: torch.matmul, then an all-reduce."""
    return all_reduce(a @ b, group)


def fallback_gemm_rs(a: torch.Tensor, b: torch.Tensor, group=None) -> torch.Tensor:
    """This rank's M / world rows of sum over ranks of a_r @ b_r: a matmul, then a reduce-scatter."""
    return reduce_scatter(a @ b, group)


def fallback_ag_gemm(a: torch.Tensor, b: torch.Tensor, group=None) -> torch.Tensor:
    """all_gather(a) @ b: an all-gather, then a matmul."""
    return all_gather(a, group) @ b


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
    ends: torch.Tensor  # int32 [experts]: offsets[1:] on the device, torch._grouped_mm's group ends


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
    return MoeRows(sources.shape[0], hidden, src[order].to(device), dst[order].to(device), tuple(offsets),
                   torch.tensor(offsets[1:], dtype=torch.int32, device=device))


def fallback_moe(x: torch.Tensor, w: torch.Tensor, plan: MoeRows, group=None) -> torch.Tensor:
    """MoE dispatch + grouped GEMM on torch: every rank's tokens gathered, the rows this rank's
    experts receive picked, and every local expert's bf16 matmul over its rows as one grouped GEMM
    (``torch._grouped_mm``) where torch has it for these operands, else one matmul per expert. Why
    grouped: 256 experts as 256 matmuls cost 8.8 ms of host time per call on the H200, against
    6.0 ms of GPU time (docs/results/2026-12-04-world1-gemm-attention.md)."""
    picked = all_gather(x, group).index_select(0, plan.src)
    h, o = plan.hidden, plan.offsets
    y = torch.zeros(plan.rows, w.shape[1], device=x.device, dtype=x.dtype)
    if len(o) == 1:
        return y
    if _grouped(picked, w, h):
        try:
            out = torch._grouped_mm(picked, w.view(len(o) - 1, h, w.shape[1]), offs=plan.ends)
            return y.index_copy_(0, plan.dst, out)
        except RuntimeError as e:  # a torch whose grouped GEMM refuses these operands: say so once, loop from now on
            _REFUSED[_grouped_key(picked)] = str(e).splitlines()[0]
            warnings.warn(f"mkernel: torch._grouped_mm refused MoE's operands ({_REFUSED[_grouped_key(picked)]}); "
                          f"the torch path runs one matmul per expert", RuntimeWarning, stacklevel=2)
    outs = [picked[o[e]:o[e + 1]] @ w[e * h:(e + 1) * h] for e in range(len(o) - 1)]
    return y.index_copy_(0, plan.dst, torch.cat(outs))


_REFUSED: dict[tuple, str] = {}  # (device type, dtype) -> why torch's grouped GEMM refused it


def _grouped_key(a: torch.Tensor) -> tuple:
    return a.device.type, a.dtype


def _grouped(a: torch.Tensor, w: torch.Tensor, hidden: int) -> bool:
    """Whether torch's grouped GEMM takes these operands: it exists (torch 2.8 on), 16-bit or fp32
    operands of one dtype, rows of whole 16-byte vectors, a weight that views as [experts, hidden,
    width], and a GPU of compute capability 9.0 on if on a GPU (its CUDA kernel is Hopper's). Not
    under autograd: its backward refuses a gradient with zero strides (``loss = y.sum()`` gives one,
    torch 2.13), where the per-expert matmuls' backward takes any."""
    if not hasattr(torch, "_grouped_mm") or a.dtype != w.dtype or a.dtype not in (torch.bfloat16, torch.float16,
                                                                                  torch.float32):
        return False
    if torch.is_grad_enabled() and (a.requires_grad or w.requires_grad) or _grouped_key(a) in _REFUSED:
        return False
    if hidden % 8 or w.shape[1] % 8 or not w.is_contiguous() or w.shape[0] % hidden:
        return False
    return not a.is_cuda or torch.cuda.get_device_capability(a.device) >= (9, 0)


# ---- float64 references (the GPU tests' oracle) ----

def reference_gemm_ar(a, b, group=None):
    return plain_all_reduce(a.double() @ b.double(), group_info(group))


def reference_gemm_rs(a, b, group=None):
    return plain_reduce_scatter(a.double() @ b.double(), group_info(group))


def reference_ag_gemm(a, b, group=None):
    return plain_all_gather(a, group_info(group)).double() @ b.double()


def reference_moe(x, w, plan: MoeRows, group=None):
    """:func:`fallback_moe` in float64."""
    picked = plain_all_gather(x, group_info(group)).double().index_select(0, plan.src)
    h, o = plan.hidden, plan.offsets
    y = torch.zeros(plan.rows, w.shape[1], device=x.device, dtype=torch.float64)
    for e in range(len(o) - 1):
        y.index_copy_(0, plan.dst[o[e]:o[e + 1]], picked[o[e]:o[e + 1]] @ w[e * h:(e + 1) * h].double())
    return y
