"""numpy oracles, one per kernel id, computed in float64.

Each takes the per-rank inputs (``{buffer: [array per rank]}``) and returns the expected per-rank
outputs (``{buffer: [array per rank]}``). Tests and the ``--data`` mode compare against these,
through :func:`expected`, which passes each oracle the shape fields it needs.
"""
from __future__ import annotations

import numpy as np

from .problems import Workload

# ||out - ref|| / ||ref|| that a correct bf16 computation meets (8 bits of mantissa; a dropped or
# doubled contribution lands near 1e-1):
BF16_RTOL = 1e-2  # bf16 inputs and outputs, sums in fp32, against the oracle of the same bf16 inputs
# The simulator's data mode computes in float32 with sums over world * k terms; a correct schedule lands near
# 1e-7 relative error, a dropped or doubled contribution near 1e-1.
DATA_RTOL = 1e-5
BF16_LOOSE_RTOL = 2e-2  # where bf16 rounding enters twice: outputs reduced in bf16 (NCCL collectives),
#                         or two bf16 computations compared with each other (a TP model's loss against torch's)


def expected(w: Workload, inputs: dict[str, list[np.ndarray]], gpus_per_node: int = 1) -> dict[str, list[np.ndarray]]:
    """The oracle of ``w.kernel`` on ``inputs`` (MoE's output layout also needs the node size)."""
    if w.kernel == "ring_attention":
        return ring_attention(inputs, heads=w.n, causal=bool(w.causal))
    if w.kernel == "moe_dispatch_gemm":
        return moe_dispatch_gemm(inputs, w, gpus_per_node)
    return globals()[w.kernel](inputs)


def gemm_ar(inputs: dict[str, list[np.ndarray]]) -> dict[str, list[np.ndarray]]:
    """Every rank ends with sum_r A_r @ B_r."""
    total = sum(a.astype(np.float64) @ b.astype(np.float64) for a, b in zip(inputs["A"], inputs["B"]))
    return {"OUT": [total] * len(inputs["A"])}


def ag_gemm(inputs: dict[str, list[np.ndarray]]) -> dict[str, list[np.ndarray]]:
    """Rank r ends with concat_q(A_q) @ B_r."""
    a = np.concatenate([x.astype(np.float64) for x in inputs["A"]])
    return {"OUT": [a @ b.astype(np.float64) for b in inputs["B"]]}


def gemm_rs(inputs: dict[str, list[np.ndarray]]) -> dict[str, list[np.ndarray]]:
    """Rank q ends with rows [q*R, (q+1)*R) of sum_r A_r @ B_r, R = m / world."""
    world = len(inputs["A"])
    total = gemm_ar(inputs)["OUT"][0]
    rows = total.shape[0] // world
    return {"OUT": [total[q * rows:(q + 1) * rows] for q in range(world)]}


def ring_attention(inputs: dict[str, list[np.ndarray]], heads: int, causal: bool = False) -> dict[str, list[np.ndarray]]:
    """Rank r ends with softmax(Q_r K^T / sqrt(D)) V and its log-sum-exp, per head, where K and V
    concatenate every rank's slice of that head (rows head * S + s of each rank's BH*S x D arrays).

    Causal: rank r's rows hold the zigzag chunks r and 2 * world - 1 - r of the global sequence
    (S / 2 rows each), and a key is visible to a query at the same or a later global position.
    """
    world = len(inputs["Q"])
    S = inputs["Q"][0].shape[0] // heads
    half = S // 2

    def positions(r: int) -> np.ndarray:
        s = np.arange(S)
        return np.where(s < half, r * half + s, (2 * world - 1 - r) * half + s - half)

    keys = np.concatenate([positions(r) for r in range(world)])

    def per_head(x: np.ndarray) -> np.ndarray:  # BH*S x D -> BH x S x D
        return x.astype(np.float64).reshape(heads, S, -1)

    k = np.concatenate([per_head(x) for x in inputs["K"]], axis=1)
    v = np.concatenate([per_head(x) for x in inputs["V"]], axis=1)
    outs, lses = [], []
    for r in range(world):
        q = per_head(inputs["Q"][r])
        s = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[2])
        if causal:
            s = np.where(keys[None, None, :] > positions(r)[None, :, None], -np.inf, s)
        m = s.max(axis=2, keepdims=True)
        p = np.exp(s - m)
        l = p.sum(axis=2, keepdims=True)
        outs.append(((p @ v) / l).reshape(heads * S, -1))
        lses.append((m + np.log(l)).reshape(heads * S, 1))
    return {"OUT": outs, "LSE": lses}


def moe_dispatch_gemm(inputs: dict[str, list[np.ndarray]], w: Workload, gpus_per_node: int) -> dict[str, list[np.ndarray]]:
    """Rank d ends with, for each of its experts j and each source rank's tokens routed to j (in the
    layout of :mod:`mkernel.routing`), X_source[tokens] @ W_d[j]; zero rows after its last pair."""
    from .routing import layout

    world = len(inputs["X"])
    segments, rows = layout(w, world // gpus_per_node, gpus_per_node)
    out = []
    for d in range(world):
        y = np.zeros((max(rows, 1), w.n))
        for j in sorted({s.expert for s in segments[d]}):  # each expert's weights converted once
            mine = [s for s in segments[d] if s.expert == j]
            weights = inputs["W"][d][j * w.k:(j + 1) * w.k].astype(np.float64)
            tokens = np.concatenate([inputs["X"][s.source][list(s.tokens)] for s in mine]).astype(np.float64)
            rows_of = np.concatenate([np.arange(s.row0, s.row0 + len(s.tokens)) for s in mine])
            y[rows_of] = tokens @ weights
        out.append(y)
    return {"Y": out}


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    """||out - ref|| / ||ref|| in float64; inf if ``out`` holds a NaN (an unwritten element)."""
    if np.isnan(out).any():
        return float("inf")
    denom = np.linalg.norm(ref)
    return float(np.linalg.norm(out.astype(np.float64) - ref) / (denom if denom > 0 else 1.0))
