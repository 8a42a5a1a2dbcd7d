"""The implementations `mkernel bench` times for one (op, shape) on one rank: the fused op, its
torch/NCCL baselines, and the no-communication ceiling, with one independent reference.

The reference is the float64 reference of :mod:`mkernel.hw.fallbacks` where it fits in memory, and the
ceiling's own output (flash SDPA over the gathered K/V; per-expert torch.matmul) for attention and
MoE, whose float32 fallbacks would need tens of GB at the grid's sizes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.distributed as dist

from .. import api, fallbacks
from ..collectives import plain_all_gather
from ..groups import group_info
from ..runtime.emulate import RankInfo

NO_NCCL = "NCCL needs one GPU per rank; these ranks share a GPU (gloo group)"
NO_SYMM = ("torch's symmetric-memory kernels take every SM and spin on their peers; ranks sharing a GPU have no "
           "SM budget that keeps them co-resident")


@dataclass
class Case:
    flops: float  # useful flops of the op on one rank
    impls: dict[str, Callable | str]  # name -> a call returning this rank's output, or why it cannot run
    reference: torch.Tensor
    view: Callable = lambda out: out  # an implementation's output as the reference's layout
    scratch: list = field(default_factory=list)  # symmetric buffers to free
    unchecked: tuple[str, ...] = ()  # implementations whose output is not the op's (a local-only ceiling)

    def poison(self) -> None:
        """Fill free memory of the reference's size with NaN, so a fresh output tensor that an op leaves
        partly unwritten (it reuses the caching allocator's blocks) fails the check."""
        junk = torch.full_like(self.reference, float("nan"))
        del junk

    def close(self) -> None:
        self.scratch.clear()
        torch.cuda.empty_cache()


def _symm_buffer(shape, dtype, group_name: str):
    import torch.distributed._symmetric_memory as symm_mem

    buf = symm_mem.empty(*shape, dtype=dtype, device="cuda")
    symm_mem.rendezvous(buf, group_name)
    return buf


def make(kernel: str, shape: dict, info: RankInfo, gpn: int, nccl: bool) -> Case:
    return {"gemm_ar": _gemm_ar, "gemm_rs": _gemm_rs, "ag_gemm": _ag_gemm, "ring_attention": _attention,
            "moe_dispatch_gemm": _moe}[kernel](shape, info, gpn, nccl)


def _opts(info: RankInfo, gpn: int) -> dict:
    return {"gpus_per_node": gpn, "sms": info.sm_budget, "mode": "fused"}  # the fused kernel, whatever auto picks


def _randn(*shape, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(*shape, device="cuda") * scale).to(torch.bfloat16)


def _gemm_ar(s: dict, info: RankInfo, gpn: int, nccl: bool) -> Case:
    m, n, k = s["m"], s["n"], s["k"]
    a, b = _randn(m, k), _randn(k, n, scale=k ** -0.5)
    group = dist.group.WORLD.group_name
    buf = _symm_buffer((m, n), torch.bfloat16, group) if not info.emulated else None

    def nccl_matmul():
        c = a @ b
        dist.all_reduce(c)
        return c

    def symm():
        torch.matmul(a, b, out=buf)
        torch.ops.symm_mem.two_shot_all_reduce_(buf, "sum", group)
        return buf

    impls = {"fused": lambda: api.gemm_ar(a, b, **_opts(info, gpn)), "nccl+matmul": nccl_matmul if nccl else NO_NCCL,
             "symm_mem": symm if not info.emulated else NO_SYMM, "ceiling": lambda: a @ b}
    return Case(2.0 * m * n * k, impls, fallbacks.reference_gemm_ar(a, b), scratch=[buf],
                unchecked=("ceiling",) if info.world > 1 else ())


def _gemm_rs(s: dict, info: RankInfo, gpn: int, nccl: bool) -> Case:
    m, n, k = s["m"], s["n"], s["k"]
    a, b = _randn(m, k), _randn(k, n, scale=k ** -0.5)
    group = dist.group.WORLD.group_name
    out = torch.empty(m // info.world, n, device="cuda", dtype=torch.bfloat16)

    def nccl_matmul():
        dist.reduce_scatter_tensor(out, a @ b)
        return out

    impls = {"fused": lambda: api.gemm_rs(a, b, **_opts(info, gpn)), "nccl+matmul": nccl_matmul if nccl else NO_NCCL,
             "symm_mem": (lambda: torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, "sum", 0, group))
             if not info.emulated else NO_SYMM,
             "ceiling": lambda: (a @ b)[info.rank * out.shape[0]:][:out.shape[0]]}
    return Case(2.0 * m * n * k, impls, fallbacks.reference_gemm_rs(a, b), unchecked=("ceiling",) if info.world > 1 else ())


def _ag_gemm(s: dict, info: RankInfo, gpn: int, nccl: bool) -> Case:
    m, n, k = s["m"], s["n"], s["k"]
    a, b = _randn(m // info.world, k), _randn(k, n, scale=k ** -0.5)
    group = dist.group.WORLD.group_name
    gathered = plain_all_gather(a, group_info(None))  # the ceiling's operand, gathered once outside the timing

    def nccl_matmul():
        g = torch.empty(m, k, device="cuda", dtype=torch.bfloat16)
        dist.all_gather_into_tensor(g, a)
        return g @ b

    impls = {"fused": lambda: api.ag_gemm(a, b, **_opts(info, gpn)), "nccl+matmul": nccl_matmul if nccl else NO_NCCL,
             "symm_mem": (lambda: torch.ops.symm_mem.fused_all_gather_matmul(a, [b], 0, group)[1][0])
             if not info.emulated else NO_SYMM,
             "ceiling": lambda: gathered @ b}
    return Case(2.0 * m * n * k, impls, fallbacks.reference_ag_gemm(a, b))


def _flash(q, k, v):
    """Flash SDPA returning (out, lse): the public SDPA returns no LSE."""
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v)[:2]
    return out, lse


def _attention(s: dict, info: RankInfo, gpn: int, nccl: bool) -> Case:
    S, D, B, H = s["m"], s["k"], 4, s["n"] // 4
    W, rank = info.world, info.rank
    q, k, v = (_randn(B, H, S, D) for _ in range(3))
    kg = plain_all_gather(k.permute(2, 0, 1, 3).contiguous(), group_info(None)).view(W * S, B, H, D).permute(1, 2, 0, 3).contiguous()
    vg = plain_all_gather(v.permute(2, 0, 1, 3).contiguous(), group_info(None)).view(W * S, B, H, D).permute(1, 2, 0, 3).contiguous()
    bufs = [(torch.empty_like(k), torch.empty_like(v)) for _ in range(2)]

    def ring():
        kk, vv = k, v
        out = lse = None
        for step in range(W):
            reqs = []
            if step < W - 1:
                nk, nv = bufs[step % 2]
                ops = [dist.P2POp(dist.isend, kk, (rank + 1) % W), dist.P2POp(dist.isend, vv, (rank + 1) % W),
                       dist.P2POp(dist.irecv, nk, (rank - 1) % W), dist.P2POp(dist.irecv, nv, (rank - 1) % W)]
                reqs = dist.batch_isend_irecv(ops)
            o, l = _flash(q, kk, vv)
            if out is None:
                out, lse = o.float(), l
            else:
                new = torch.logaddexp(lse, l)
                out = out * torch.exp(lse - new).unsqueeze(-1) + o.float() * torch.exp(l - new).unsqueeze(-1)
                lse = new
            for r in reqs:
                r.wait()
            if step < W - 1:
                kk, vv = nk, nv
        return out.to(q.dtype)

    ceiling = lambda: _flash(q, kg, vg)[0]  # noqa: E731
    impls = {"fused": lambda: api.ring_attention(q, k, v, **_opts(info, gpn))[0],
             "nccl ring+sdpa": ring if nccl else NO_NCCL, "ceiling": ceiling}
    return Case(4.0 * B * H * S * (W * S) * D, impls, ceiling())


def _moe(s: dict, info: RankInfo, gpn: int, nccl: bool) -> Case:
    from mkernel.routing import layout

    T, width, hidden, experts, topk = s["m"], s["n"], s["k"], 256, 8
    W, rank = info.world, info.rank
    per = experts // W
    g = torch.Generator(device="cuda").manual_seed(77 + rank)
    idx = torch.rand(T // W, experts, device="cuda", generator=g).topk(topk, dim=1).indices
    x = _randn(T // W, hidden)
    w = _randn(per * hidden, width, scale=hidden ** -0.5)
    h = api.moe_plan(idx, experts, hidden, width, **_opts(info, gpn))
    segments, _ = layout(h.workload, W // gpn, gpn)
    rows = sum(len(sg.tokens) for sg in segments[rank])
    # The a2a baseline: each source sends its rows to each destination in that destination's layout
    # order; the destination receives them grouped by source and permutes them into layout order.
    send_idx = [t for d in range(W) for sg in segments[d] if sg.source == rank for t in sg.tokens]
    send_counts = [sum(len(sg.tokens) for sg in segments[d] if sg.source == rank) for d in range(W)]
    recv_counts = [sum(len(sg.tokens) for sg in segments[rank] if sg.source == r) for r in range(W)]
    offsets = {r: sum(recv_counts[:r]) for r in range(W)}
    perm, seen = [], dict.fromkeys(range(W), 0)
    for sg in segments[rank]:
        start = offsets[sg.source] + seen[sg.source]
        perm.extend(range(start, start + len(sg.tokens)))
        seen[sg.source] += len(sg.tokens)
    send_idx_t = torch.tensor(send_idx, device="cuda", dtype=torch.int64)
    perm_t = torch.tensor(perm, device="cuda", dtype=torch.int64)
    bounds = []
    for j in range(per):
        seg_rows = [sg for sg in segments[rank] if sg.expert == j]
        if seg_rows:
            bounds.append((j, seg_rows[0].row0, seg_rows[-1].row0 + len(seg_rows[-1].tokens)))
    recv = torch.empty(rows, hidden, device="cuda", dtype=torch.bfloat16)
    y = torch.empty(max(rows, 1), width, device="cuda", dtype=torch.bfloat16)

    def experts_over(xe):
        for j, r0, r1 in bounds:
            torch.matmul(xe[r0:r1], w[j * hidden:(j + 1) * hidden], out=y[r0:r1])
        return y

    def a2a():
        dist.all_to_all_single(recv, x.index_select(0, send_idx_t), recv_counts, send_counts)
        return experts_over(recv.index_select(0, perm_t))

    # The ceiling's operand, dispatched once outside the timing (through the host on a gloo group).
    if nccl:
        dist.all_to_all_single(recv, x.index_select(0, send_idx_t), recv_counts, send_counts)
        dispatched = recv.index_select(0, perm_t)
    else:
        tokens = plain_all_gather(x, group_info(None)).view(W, T // W, hidden)
        dispatched = torch.cat([tokens[sg.source][list(sg.tokens)] for sg in segments[rank]])
    reference = experts_over(dispatched).clone()
    impls = {"fused": lambda: api.moe_dispatch_gemm(x, w, h), "a2a+matmul": a2a if nccl else NO_NCCL,
             "ceiling": lambda: experts_over(dispatched)}
    return Case(2.0 * rows * hidden * width, impls, reference[:rows], view=lambda o: o[:rows])
