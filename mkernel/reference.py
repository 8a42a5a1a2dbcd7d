"""numpy oracles, one per kernel id, computed in float64.

Each takes the per-rank inputs (``{buffer: [array per rank]}``) and returns the expected per-rank
outputs (``{buffer: [array per rank]}``). Tests and the ``--data`` mode compare against these.
"""
from __future__ import annotations

import numpy as np


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


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    """||out - ref|| / ||ref|| in float64; inf if ``out`` holds a NaN (an unwritten element)."""
    if np.isnan(out).any():
        return float("inf")
    denom = np.linalg.norm(ref)
    return float(np.linalg.norm(out.astype(np.float64) - ref) / (denom if denom > 0 else 1.0))
