"""The collectives of the torch path, on the group's backend (NCCL; gloo for emulated clusters,
where several ranks share one GPU and the collectives move through the host).

``plain_*`` are the collectives themselves: what the float64 references and the fused path's
helpers call, outside autograd. :func:`all_gather`, :func:`reduce_scatter`, :func:`all_reduce` and
:func:`replicate` are the same collectives, differentiable: under autograd (or while torch.compile
traces) each is a custom op, so torch.compile treats it as one opaque call (fake implementations
give the shapes), and its backward is its dual. An all-reduce's result is replicated and every rank
computes the same loss from it (Megatron's convention), so its gradient passes through;
``replicate`` is the mirror image: a tensor every rank holds a copy of (a parameter) is used as is,
and its gradient is summed over the ranks. Outputs never alias inputs (custom ops must not), hence
the copies where the plain collective works in place. Without autograd they are the plain in-place
collectives.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from .groups import GroupInfo, group_info


def plain_all_gather(x: torch.Tensor, g: GroupInfo) -> torch.Tensor:
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


def plain_all_reduce(x: torch.Tensor, g: GroupInfo) -> torch.Tensor:
    """The sum over ranks, in place where the collective runs on the GPU."""
    if g.world == 1:
        return x
    if g.host:
        y = x.cpu()
        dist.all_reduce(y, group=g.pg)
        return y.to(x.device)
    dist.all_reduce(x, group=g.pg)
    return x


def plain_reduce_scatter(x: torch.Tensor, g: GroupInfo) -> torch.Tensor:
    """This rank's rows of the sum over ranks."""
    if g.world == 1:
        return x
    rows = x.shape[0] // g.world
    if g.host:
        total = plain_all_reduce(x.cpu(), g)
        return total[g.rank * rows:(g.rank + 1) * rows].to(x.device).contiguous()
    out = x.new_empty((rows, *x.shape[1:]))
    dist.reduce_scatter_tensor(out, x, group=g.pg)
    return out


def recorded(*tensors: torch.Tensor) -> bool:
    """Whether autograd records an op on these tensors, or torch.compile traces it."""
    return torch.compiler.is_compiling() or (torch.is_grad_enabled() and any(t.requires_grad for t in tensors))


@torch.library.custom_op("mkernel::all_gather", mutates_args=())
def _all_gather_op(x: torch.Tensor, group_name: str) -> torch.Tensor:
    out = plain_all_gather(x, group_info(group_name or None))
    return out.clone() if out is x else out


@_all_gather_op.register_fake
def _(x, group_name):
    return x.new_empty(group_info(group_name or None).world * x.shape[0], *x.shape[1:])


def _reduce_scatter_copy(x: torch.Tensor, g: GroupInfo) -> torch.Tensor:
    """:func:`plain_reduce_scatter` without touching ``x`` (on the host that one sums in place)."""
    return plain_reduce_scatter(x.clone() if g.host or g.world == 1 else x, g)


@torch.library.custom_op("mkernel::reduce_scatter", mutates_args=())
def _reduce_scatter_op(x: torch.Tensor, group_name: str) -> torch.Tensor:
    return _reduce_scatter_copy(x, group_info(group_name or None))


@_reduce_scatter_op.register_fake
def _(x, group_name):
    return x.new_empty(x.shape[0] // group_info(group_name or None).world, *x.shape[1:])


@torch.library.custom_op("mkernel::all_reduce", mutates_args=())
def _all_reduce_op(x: torch.Tensor, group_name: str) -> torch.Tensor:
    return plain_all_reduce(x.clone(), group_info(group_name or None))


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
    return _collective(torch.ops.mkernel.all_gather, plain_all_gather, x, group)


def reduce_scatter(x: torch.Tensor, group=None) -> torch.Tensor:
    """This rank's rows of the sum over ranks (``x`` left as it was); its gradient is all-gathered."""
    return _collective(torch.ops.mkernel.reduce_scatter, _reduce_scatter_copy, x, group)


def all_reduce(x: torch.Tensor, group=None) -> torch.Tensor:
    """The sum over ranks (in place on ``x`` without autograd); its gradient passes through."""
    return _collective(torch.ops.mkernel.all_reduce, plain_all_reduce, x, group)


def replicate(x: torch.Tensor, group=None) -> torch.Tensor:
    """``x`` itself, which every rank holds a copy of; its gradient is summed over the ranks."""
    g = group_info(group)
    return torch.ops.mkernel.replicate(x, g.name) if g.world > 1 and recorded(x) else x
