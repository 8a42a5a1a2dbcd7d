"""The PyTorch API: ``mkernel.gemm_ar``, ``gemm_rs``, ``ag_gemm``, ``ring_attention``, ``moe_plan`` +
``moe_dispatch_gemm``, each taking the fused kernel or the unfused torch path by one rule.

Layouts follow the torch ops: ``gemm_ar(a [M, K_r], b [K_r, N]) -> [M, N]`` (sum over ranks);
``gemm_rs(a [M, K_r], b [K_r, N]) -> [M / world, N]`` (this rank's rows of the sum);
``ag_gemm(a [M / world, K], b [K, N_r]) -> [M, N_r]`` (the gathered rows times the local B);
``ring_attention(q, k, v [B, H, S_r, D], causal) -> (out [B, H, S_r, D], lse [B, H, S_r] fp32)``,
where with ``causal`` rank r holds the zigzag chunks r and 2 * world - 1 - r of the sequence;
``moe_dispatch_gemm(x [T_r, H], w [E_r * H, I], handle) -> [rows, I]`` with the handle of
:func:`moe_plan` (one per routing: the layout depends on every rank's routing).

Every op takes ``mode``: ``"auto"`` (the default) runs the fused kernel only where it is measured
faster than the torch path (:mod:`dispatch`; at world 1 never), ``"fused"`` and ``"fallback"``
force a side. :func:`explain` says which path a call takes and why.

Why a call is cheap: the first call on a (shape, dtype, group, topology, mode) resolves the path
(and, for the fused one, builds the executor: collective) and keeps it; later calls are one
dictionary lookup and the path itself. In eager mode the fused path calls its executor directly;
under torch.compile, or when autograd must record the op, it goes through ``torch.ops.mkernel.*``
(:mod:`ops`), and the torch path at world > 1 through its twin ``torch.ops.mkernel.torch_*``;
both have a backward (:mod:`autograd`) whose dual ops take their path by this same rule and mode.
"""
from __future__ import annotations

import torch

from mkernel.errors import InputError
from mkernel.problems import Workload

from . import autograd, fallbacks, ops  # noqa: F401 - autograd registers the ops' backward
from .collectives import plain_all_gather
from .dispatch import Call, Decision, decide
from .fallbacks import fallback_ag_gemm, fallback_gemm_ar, fallback_gemm_rs, fallback_moe, \
    fallback_ring_attention
from .groups import group_info
from .ops import MoeHandle, check, configure  # noqa: F401 - the public names

_BOUND: dict[tuple, tuple[Decision, object]] = {}  # call key -> (decision, the path's callable)
HEAD_DIMS = (64, 128)  # the attention tile's head dimensions (tests run both)


def close() -> None:
    """Free every cached executor (collective) and forget the calls bound to them: a call after
    close() builds its path again instead of launching on freed memory."""
    _BOUND.clear()
    ops.close()


def _name(group) -> str:
    return "" if group is None else group if isinstance(group, str) else group.group_name


def _needs_autograd(*tensors: torch.Tensor) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _device() -> str:
    return torch.cuda.get_device_name() if torch.cuda.is_available() else ""


def _gemm_objection(op: str, a: torch.Tensor, b: torch.Tensor, world: int) -> str | None:
    """Why the fused GEMM kernel cannot run this call, or None."""
    if a.dtype != torch.bfloat16 or b.dtype != torch.bfloat16:
        return f"it runs bf16 only, got {a.dtype} and {b.dtype}"
    if not (a.is_cuda and b.is_cuda and a.is_contiguous() and b.is_contiguous()):
        return "it takes contiguous CUDA tensors"
    m, k = a.shape
    n = b.shape[1]
    if min(m, n, k) == 0:
        return f"the problem is empty ({m} x {n} x {k})"
    if k % 8 or n % 8:
        return f"TMA needs rows of whole 16-byte vectors: K = {k} and N = {n} must be multiples of 8"
    if op == "gemm_rs" and m % world:
        return f"M = {m} rows do not split into {world} ranks"
    return None


def _matmul_checked(op: str, a: torch.Tensor, b: torch.Tensor) -> None:
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise InputError(f"mkernel.{op}: a [M, K] and b [K, N] must be 2-D with one K, got "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")


def _decide_gemm(op: str, a, b, group, gpus_per_node, mode) -> tuple[Decision, Call]:
    _matmul_checked(op, a, b)
    g = group_info(group)
    gpn = gpus_per_node or g.world
    if gpn < 1 or g.world % gpn:
        raise InputError(f"mkernel.{op}: gpus_per_node={gpn} must divide the group's {g.world} ranks")
    if op == "gemm_rs" and a.shape[0] % g.world:
        raise InputError(f"mkernel.{op}: M = {a.shape[0]} rows do not split into {g.world} ranks")
    m = a.shape[0] * (g.world if op == "ag_gemm" else 1)
    call = Call(op, m, b.shape[1], a.shape[1], g.world, gpn, _device(), _gemm_objection(op, a, b, g.world))
    return decide(call, mode), call


def _bind_gemm(op: str, a, b, group, gpus_per_node, sms, mode, transport) -> tuple[Decision, object]:
    """The path of a GEMM op call: (decision, callable(a, b))."""
    d, call = _decide_gemm(op, a, b, group, gpus_per_node, mode)
    m, gpn = call.m, call.gpus_per_node
    if not d.fused:
        if call.world == 1:
            return d, torch.matmul  # every GEMM op is the plain product on one rank
        fallback = {"gemm_ar": fallback_gemm_ar, "gemm_rs": fallback_gemm_rs, "ag_gemm": fallback_ag_gemm}[op]
        g, name, n_gpn, n_sms = group_info(group), _name(group), gpus_per_node or 0, sms or 0

        def torch_path(x, y):
            if _needs_autograd(x, y):
                return torch.ops.mkernel.torch_gemm(x, y, op, name, n_gpn, n_sms, mode, transport)
            return fallback(x, y, g)
        return d, torch_path
    name, n_sms = _name(group), sms or 0
    ex = ops.executor(Workload(kernel=op, m=m, n=b.shape[1], k=a.shape[1]), name, gpn, n_sms, transport)
    traced = getattr(torch.ops.mkernel, op)

    def fused(x, y):
        if _needs_autograd(x, y):
            return traced(x, y, name, gpn, n_sms, mode, transport)
        return ex({"A": x, "B": y})["OUT"]
    return d, fused


def _gemm(op: str, a, b, group, gpus_per_node, sms, mode, transport):
    if mode == "auto" and group is None and gpus_per_node is None and group_info(None).world == 1:  # cheapest first
        if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
            _matmul_checked(op, a, b)
        return torch.matmul(a, b)  # one rank: every GEMM op is the plain product (dispatch rule 2)
    if torch.compiler.is_compiling():
        path = _traced_path(op, tuple(a.shape), tuple(b.shape), _name(group), gpus_per_node or 0, mode)
        if path == "fused":
            return getattr(torch.ops.mkernel, op)(a, b, _name(group), gpus_per_node or 0, sms or 0, mode, transport)
        if _traced_world(_name(group)) == 1:
            return torch.matmul(a, b)
        return torch.ops.mkernel.torch_gemm(a, b, op, _name(group), gpus_per_node or 0, sms or 0, mode, transport)
    key = (op, a.shape, b.shape, a.dtype, b.dtype, a.get_device(), a.is_contiguous(), b.is_contiguous(), group,
           gpus_per_node, sms, mode, transport)
    hit = _BOUND.get(key)
    if hit is None:
        hit = _BOUND[key] = _bind_gemm(op, a, b, group, gpus_per_node, sms, mode, transport)
    return hit[1](a, b)


@torch._dynamo.assume_constant_result
def _traced_world(group_name: str) -> int:
    return group_info(group_name or None).world


@torch._dynamo.assume_constant_result
def _traced_path(op: str, a_shape: tuple, b_shape: tuple, group_name: str, gpus_per_node: int, mode: str) -> str:
    """The path under torch.compile, decided at trace time from shapes (bf16, contiguous CUDA
    operands assumed: the custom op's own checks raise otherwise)."""
    g = group_info(group_name or None)
    m = a_shape[0] * (g.world if op == "ag_gemm" else 1)
    k, n = a_shape[1], b_shape[1]
    objection = "the problem is empty" if min(m, n, k) == 0 else "K or N not a multiple of 8" if k % 8 or n % 8 else None
    return decide(Call(op, m, n, k, g.world, gpus_per_node or g.world, _device(), objection), mode).path


def gemm_ar(a: torch.Tensor, b: torch.Tensor, group=None, *, gpus_per_node: int | None = None,
            sms: int | None = None, mode: str = "auto", transport: str = "auto") -> torch.Tensor:
    """sum over the group of a_r @ b_r, on every rank. ``gpus_per_node`` (default: the whole group
    is one node) says which peers are reached by NVLink and which through the proxy; ``sms``: the
    fused kernel's SM budget (default: the whole GPU); ``transport``: how the proxy reaches the
    other nodes (``verbs_rc``, ``verbs_srd``, ``ofi``, ``loopback`` for nodes emulated on one host;
    ``auto``: what ``mkernel doctor`` picks here), the same on every rank (every op takes it)."""
    return _gemm("gemm_ar", a, b, group, gpus_per_node, sms, mode, transport)


def gemm_rs(a: torch.Tensor, b: torch.Tensor, group=None, *, gpus_per_node: int | None = None,
            sms: int | None = None, mode: str = "auto", transport: str = "auto") -> torch.Tensor:
    """This rank's M / world rows of sum over the group of a_r @ b_r."""
    return _gemm("gemm_rs", a, b, group, gpus_per_node, sms, mode, transport)


def ag_gemm(a: torch.Tensor, b: torch.Tensor, group=None, *, gpus_per_node: int | None = None,
            sms: int | None = None, mode: str = "auto", transport: str = "auto") -> torch.Tensor:
    """all_gather(a) @ b: every rank's rows of A, in rank order, times this rank's B."""
    return _gemm("ag_gemm", a, b, group, gpus_per_node, sms, mode, transport)


def _decide_attention(q, k, v, causal, group, gpus_per_node, mode) -> tuple[Decision, int]:
    if q.dim() != 4 or k.shape != q.shape or v.shape != q.shape:
        raise InputError(f"mkernel.ring_attention: q, k, v must share one [B, H, S, D] shape, got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    g = group_info(group)
    gpn = gpus_per_node or g.world
    B, H, S, D = q.shape
    objection = None
    if any(t.dtype != torch.bfloat16 or not t.is_cuda or not t.is_contiguous() for t in (q, k, v)):
        objection = "it takes contiguous bf16 CUDA tensors"
    elif D not in HEAD_DIMS:
        objection = f"head dimension {D} is not one of {HEAD_DIMS}"
    elif B * H * S == 0:
        objection = "the problem is empty"
    elif causal and S % 2:
        objection = f"a causal zigzag shard splits in two halves, and S = {S} is odd"
    return decide(Call("ring_attention", S, B * H, D, g.world, gpn, _device(), objection), mode), gpn


def _bind_attention(q, k, v, causal, group, gpus_per_node, sms, mode, transport) -> tuple[Decision, object]:
    d, gpn = _decide_attention(q, k, v, causal, group, gpus_per_node, mode)
    if not d.fused:
        g, name, n_gpn, n_sms = group_info(group), _name(group), gpus_per_node or 0, sms or 0

        def torch_path(x, y, z):  # at world 1 too: torch's attention kernels drop lse's gradient
            if _needs_autograd(x, y, z):
                return torch.ops.mkernel.torch_ring_attention(x, y, z, causal, name, n_gpn, n_sms, mode, transport)
            return fallback_ring_attention(x, y, z, g, causal=causal)
        return d, torch_path
    name, n_sms = _name(group), sms or 0
    ex = ops.executor(ops.attention_workload(q, causal), name, gpn, n_sms, transport)

    def fused(x, y, z):
        if _needs_autograd(x, y, z):
            return torch.ops.mkernel.ring_attention(x, y, z, causal, name, gpn, n_sms, mode, transport)
        return ops.run_attention(ex, x, y, z)
    return d, fused


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group=None, *, causal: bool = False,
                   gpus_per_node: int | None = None, sms: int | None = None,
                   mode: str = "auto", transport: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of this rank's queries over every rank's keys and values: (out, lse)."""
    if torch.compiler.is_compiling():
        call = (bool(causal), _name(group), gpus_per_node or 0, sms or 0, mode, transport)
        if _traced_attention_path(tuple(q.shape), bool(causal), _name(group), gpus_per_node or 0, mode) == "fused":
            return torch.ops.mkernel.ring_attention(q, k, v, *call)
        if _needs_autograd(q, k, v) or _traced_world(_name(group)) > 1:
            return torch.ops.mkernel.torch_ring_attention(q, k, v, *call)
        return fallback_ring_attention(q, k, v, group, causal=causal)
    key = ("ring_attention", q.shape, k.shape, v.shape, q.dtype, q.get_device(), q.is_contiguous(),
           k.is_contiguous(), v.is_contiguous(), bool(causal), group, gpus_per_node, sms, mode, transport)
    hit = _BOUND.get(key)
    if hit is None:
        hit = _BOUND[key] = _bind_attention(q, k, v, bool(causal), group, gpus_per_node, sms, mode, transport)
    return hit[1](q, k, v)


@torch._dynamo.assume_constant_result
def _traced_attention_path(shape: tuple, causal: bool, group_name: str, gpus_per_node: int, mode: str) -> str:
    g = group_info(group_name or None)
    B, H, S, D = shape
    objection = None if D in HEAD_DIMS and B * H * S and not (causal and S % 2) else "shape"
    return decide(Call("ring_attention", S, B * H, D, g.world, gpus_per_node or g.world, _device(), objection),
                  mode).path


# ---- MoE ----

def moe_plan(topk_idx: torch.Tensor, experts: int, hidden: int, width: int, group=None, *,
             topk_weights: torch.Tensor | None = None, gpus_per_node: int | None = None,
             sms: int | None = None, mode: str = "auto", transport: str = "auto") -> MoeHandle:
    """Plan MoE dispatch + grouped GEMM for one routing (collective; reads every rank's routing on
    the host, so do it once per routing, not per step). ``topk_idx``: this rank's [tokens, topk]
    expert ids; experts e live on rank e // (experts / world). The handle's ``decision`` says which
    path its calls take."""
    g = group_info(group)
    gpn = gpus_per_node or g.world
    if experts % g.world or gpn < 1 or g.world % gpn:
        raise InputError(f"mkernel.moe_plan: {experts} experts over {g.world} ranks ({gpn} per node): experts "
                         f"must split evenly over ranks and gpus_per_node divide the group")
    idx = plain_all_gather(topk_idx.to(torch.int64).contiguous(), g).view(g.world, *topk_idx.shape).cpu()
    w = Workload(kernel="moe_dispatch_gemm", m=topk_idx.shape[0] * g.world, n=width, k=hidden, experts=experts,
                 topk=topk_idx.shape[1], routes=tuple(tuple(map(tuple, r.tolist())) for r in idx))
    sources = fallbacks.moe_sources(w, g.rank, g.world // gpn, gpn)
    rows = int((sources[:, 0] >= 0).sum())
    row_weights = None
    if topk_weights is not None:
        weights = plain_all_gather(topk_weights.float().contiguous(), g).view(g.world, *topk_weights.shape).cpu()
        row_weights = torch.zeros(sources.shape[0])
        real = sources[:, 0] >= 0
        src, tok, j = sources[real].T
        slot = (idx[src, tok] == (g.rank * (experts // g.world) + j)[:, None]).int().argmax(dim=1)  # no row loop
        row_weights[real] = weights[src, tok, slot]
        row_weights = row_weights.to(topk_idx.device)
    objection = None if hidden % 8 == 0 and width % 8 == 0 and rows else \
        f"hidden {hidden} and width {width} must be multiples of 8, and some rows routed"
    d = decide(Call("moe_dispatch_gemm", w.m, width, hidden, g.world, gpn, _device(), objection, w.topk), mode)
    if d.fused:
        ops.executor(w, _name(group), gpn, sms or 0, transport)  # set up now (collective), not in the first call
    return ops.register(dict(workload=w, group_name=_name(group), gpus_per_node=gpn, sms=sms or 0, transport=transport,
                             sources=sources.to(topk_idx.device), row_weights=row_weights, decision=d,
                             torch_rows=fallbacks.moe_rows(sources, topk_idx.shape[0], hidden, experts // g.world,
                                                           topk_idx.device)))


def moe_dispatch_gemm(x: torch.Tensor, w: torch.Tensor, handle: MoeHandle) -> torch.Tensor:
    """Dispatch this rank's tokens ``x`` [tokens, hidden] to their experts' ranks and run each
    rank's experts ``w`` [experts / world * hidden, width] (stacked) over the rows they receive:
    returns [handle.rows, width], row i for the (token, expert) pair ``handle.sources[i]``."""
    if not handle.decision.fused:
        return fallback_moe(x, w, handle.torch_rows, handle.group_name or None)
    if any(t.dtype != torch.bfloat16 or not t.is_cuda or not t.is_contiguous() for t in (x, w)):
        raise InputError(f"mkernel.moe_dispatch_gemm: the fused path takes contiguous bf16 CUDA tensors, got "
                         f"{x.dtype} and {w.dtype}")
    if torch.compiler.is_compiling() or _needs_autograd(x, w):
        return torch.ops.mkernel.moe_dispatch_gemm(x, w, handle.id)
    return ops.run_moe(handle, x, w)


def explain(op: str, *args, **kwargs) -> Decision:
    """The path a call ``mkernel.<op>(*args, **kwargs)`` takes and why, printed and returned,
    without running or setting up anything."""
    if op == "moe_dispatch_gemm":
        d = (args[2] if len(args) > 2 else kwargs["handle"]).decision
    elif op == "ring_attention":
        q, k, v = args[:3]
        group = args[3] if len(args) > 3 else kwargs.get("group")
        d = _decide_attention(q, k, v, bool(kwargs.get("causal", False)), group, kwargs.get("gpus_per_node"),
                              kwargs.get("mode", "auto"))[0]
    elif op in ("gemm_ar", "gemm_rs", "ag_gemm"):
        a, b = args[:2]
        group = args[2] if len(args) > 2 else kwargs.get("group")
        d = _decide_gemm(op, a, b, group, kwargs.get("gpus_per_node"), kwargs.get("mode", "auto"))[0]
    else:
        raise InputError(f"mkernel.explain: unknown op {op!r}; one of gemm_ar, gemm_rs, ag_gemm, ring_attention, "
                         f"moe_dispatch_gemm")
    print(f"mkernel.{op}: {d}")
    return d
