"""The float64 oracles of data mode, at the rows and columns a :class:`~mkernel.sampling.Plan` keeps.

Each oracle computes, for every output buffer and rank, the entries (kept rows x kept columns) from
the op's definition, drawing the input entries it needs from :class:`Inputs` (the same hashed values
the data store holds). They restate :mod:`mkernel.reference` entry by entry, and
tests/test_sampling.py checks them against it on whole arrays; they share no code with the schedules
or the data store, so a wrong schedule cannot agree with them by construction.
"""
from __future__ import annotations

import math

import numpy as np

from .cluster import Cluster
from .ir import BufferKind, Schedule
from .problems import Workload
from .sampling import Plan, values


def input_scales(w: Workload, c: Cluster) -> dict[str, float]:
    """Each input's scale (as the builders' make_inputs: outputs stay O(1)); 0 for MoE's zero row."""
    if w.kernel in ("gemm_ar", "gemm_rs"):
        return {"A": 1.0, "B": 1.0 / math.sqrt(w.k * c.world)}
    if w.kernel == "ag_gemm":
        return {"A": 1.0, "B": 1.0 / math.sqrt(w.k)}
    if w.kernel == "ring_attention":
        return {"Q": 1.0, "K": 1.0, "V": 1.0}
    return {"X": 1.0, "W": 1.0 / math.sqrt(w.k), "Z": 0.0}


class Inputs:
    """Any entries of the op's inputs, drawn on demand (a pure function of seed, buffer, rank, index)."""

    def __init__(self, w: Workload, c: Cluster, schedule: Schedule, seed: int) -> None:
        self.seed, self.scales = seed, input_scales(w, c)
        self.dims = {b.name: (b.rows, b.cols) for b in schedule.buffers if b.kind is BufferKind.INPUT}

    def get(self, name: str, rank: int, rows: np.ndarray | None = None, cols: np.ndarray | None = None) -> np.ndarray:
        nrows, ncols = self.dims[name]
        rows = np.arange(nrows) if rows is None else np.asarray(rows)
        cols = np.arange(ncols) if cols is None else np.asarray(cols)
        if self.scales[name] == 0.0:
            return np.zeros((len(rows), len(cols)), dtype=np.float32)
        return values(self.seed, name, rank, ncols, rows, cols, self.scales[name])

    def for_plan(self, plan: Plan) -> dict[str, list[np.ndarray]]:
        """Every rank's inputs at the plan's kept rows and columns (what the data store holds)."""
        return {name: [self.get(name, r, plan.indices(name, 0), plan.indices(name, 1))
                       for r in range(plan.schedule.world)] for name in self.dims}


def expected(w: Workload, c: Cluster, inputs: Inputs, plan: Plan) -> dict[str, list[np.ndarray]]:
    """Per output buffer of the plan's schedule, every rank's expected entries (kept rows x columns)."""
    world = c.world
    outs = {b.name: (plan.indices(b.name, 0), plan.indices(b.name, 1))
            for b in plan.schedule.buffers if b.kind is BufferKind.OUTPUT}
    if w.kernel == "ring_attention":
        return _attention(w, c, inputs, outs)
    if w.kernel == "moe_dispatch_gemm":
        from .routing import layout

        rows, cols = outs["Y"]
        segments, total = layout(w, c.nodes, c.gpus_per_node)
        return {"Y": [_moe(w, inputs, d, segments[d], max(total, 1), rows, cols) for d in range(world)]}
    rows, cols = outs["OUT"]

    def gemm_sum(global_rows: np.ndarray) -> np.ndarray:
        return sum(inputs.get("A", q, global_rows).astype(np.float64) @ inputs.get("B", q, None, cols).astype(np.float64)
                   for q in range(world))

    if w.kernel == "gemm_ar":
        total = gemm_sum(rows)
        return {"OUT": [total] * world}
    if w.kernel == "gemm_rs":
        per = w.m // world
        return {"OUT": [gemm_sum(r * per + rows) for r in range(world)]}
    per = w.m // world  # ag_gemm: global row i is row i % per of rank i // per's shard
    a = np.empty((len(rows), w.k))
    for q in range(world):
        mine = rows // per == q
        if mine.any():
            a[mine] = inputs.get("A", q, rows[mine] % per)
    return {"OUT": [a @ inputs.get("B", r, None, cols).astype(np.float64) for r in range(world)]}


def _attention(w: Workload, c: Cluster, inputs: Inputs, outs: dict) -> dict[str, list[np.ndarray]]:
    """Rank r's rows h * S + s: softmax(q K^T / sqrt(D)) V over every rank's keys of head h (zigzag
    positions when causal), and the log-sum-exp."""
    world, S, D = c.world, w.m, w.k
    half = S // 2

    def positions(r: int) -> np.ndarray:
        s = np.arange(S)
        return np.where(s < half, r * half + s, (2 * world - 1 - r) * half + s - half)

    keys = np.concatenate([positions(q) for q in range(world)])
    out_rows, out_cols = outs["OUT"]
    lse_rows, _ = outs["LSE"]
    rows = np.union1d(out_rows, lse_rows)
    result = {"OUT": [], "LSE": []}
    for r in range(world):
        o = np.empty((len(rows), len(out_cols)))
        lse = np.empty((len(rows), 1))
        for h in np.unique(rows // S):
            sel = rows // S == h
            block = h * S + np.arange(S)
            q = inputs.get("Q", r, rows[sel]).astype(np.float64)
            k = np.concatenate([inputs.get("K", p, block) for p in range(world)]).astype(np.float64)
            v = np.concatenate([inputs.get("V", p, block, out_cols) for p in range(world)]).astype(np.float64)
            s = q @ k.T / np.sqrt(D)
            if w.causal:
                s = np.where(keys[None, :] > positions(r)[rows[sel] % S][:, None], -np.inf, s)
            m = s.max(axis=1, keepdims=True)
            p = np.exp(s - m)
            l = p.sum(axis=1, keepdims=True)
            o[sel], lse[sel] = (p @ v) / l, m + np.log(l)
        result["OUT"].append(o[np.searchsorted(rows, out_rows)])
        result["LSE"].append(lse[np.searchsorted(rows, lse_rows)])
    return result


def _moe(w: Workload, inputs: Inputs, d: int, segments, size: int, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Rank d's output rows in the layout of :mod:`mkernel.routing` (its ``segments``):
    X_source[token] @ W_d[expert]; zero after its last pair."""
    source, token, expert = (np.full(size, -1, dtype=np.int64) for _ in range(3))
    for s in segments:
        span = slice(s.row0, s.row0 + len(s.tokens))
        source[span], token[span], expert[span] = s.source, np.asarray(s.tokens), s.expert
    y = np.zeros((len(rows), len(cols)))
    for e in np.unique(expert[rows][expert[rows] >= 0]):
        weights = inputs.get("W", d, e * w.k + np.arange(w.k), cols).astype(np.float64)
        for src in np.unique(source[rows][expert[rows] == e]):
            sel = (expert[rows] == e) & (source[rows] == src)
            y[sel] = inputs.get("X", src, token[rows][sel]).astype(np.float64) @ weights
    return y
