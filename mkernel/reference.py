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


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    """||out - ref|| / ||ref|| in float64; inf if ``out`` holds a NaN (an unwritten element)."""
    if np.isnan(out).any():
        return float("inf")
    denom = np.linalg.norm(ref)
    return float(np.linalg.norm(out.astype(np.float64) - ref) / (denom if denom > 0 else 1.0))
