"""MoE routing and the expert-input layout it implies, shared by the builder and the oracle.

Routing is seeded: every token picks ``topk`` distinct experts, uniformly or with Zipf-skewed
popularity (expert popularity ~ 1 / rank^ZIPF_S over a seeded permutation of the experts). Expert e
lives on rank e // (experts / world).

The layout on destination rank d: for each local expert j in order, for each source rank in
``source_order(d)`` (own, node peers, then other nodes nearest first), the tokens of that source
routed to that expert, ascending. Its rows are where the dispatch writes and the GEMM reads.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .problems import Workload

ZIPF_S = 1.2


def route(w: Workload, world: int) -> list[np.ndarray]:
    """Per source rank, a (tokens per rank x topk) array of expert ids: ``w.routes`` when given,
    else drawn from the seed."""
    if w.routes:
        return [np.asarray(r, dtype=np.int64).reshape(-1, w.topk) for r in w.routes]
    rng = np.random.default_rng(w.routing_seed)
    per = w.m // world
    if w.routing == "zipf":
        popularity = 1.0 / np.arange(1, w.experts + 1) ** ZIPF_S
        logits = np.log(popularity[rng.permutation(w.experts)])
    else:
        logits = np.zeros(w.experts)
    out = []
    for _ in range(world):  # Gumbel top-k: topk distinct experts, each drawn by popularity
        keys = logits[None, :] + rng.gumbel(size=(per, w.experts))
        out.append(np.argsort(-keys, axis=1)[:, :w.topk])
    return out


@dataclass(frozen=True)
class Segment:
    dest: int
    expert: int  # local index on dest
    source: int
    row0: int  # first row in dest's expert-input buffer
    tokens: tuple[int, ...]  # source-local token ids, ascending


def source_order(dest: int, nodes: int, gpn: int) -> list[int]:
    node, local = divmod(dest, gpn)
    return [((node + dn) % nodes) * gpn + (local + dl) % gpn for dn in range(nodes) for dl in range(gpn)]


def layout(w: Workload, nodes: int, gpn: int) -> tuple[list[list[Segment]], int]:
    """Per destination rank its segments in row order, and the largest row count over ranks."""
    world = nodes * gpn
    per_gpu = w.experts // world
    routes = route(w, world)
    out, most = [], 0
    for d in range(world):
        segs, row = [], 0
        for j in range(per_gpu):
            e = d * per_gpu + j
            for r in source_order(d, nodes, gpn):
                tokens = tuple(int(i) for i in np.nonzero((routes[r] == e).any(axis=1))[0])
                if tokens:
                    segs.append(Segment(d, j, r, row, tokens))
                    row += len(tokens)
        out.append(segs)
        most = max(most, row)
    return out, most
