"""MoE routing and the expert-input layout it implies, shared by the builder and the oracle.

Routing is seeded: every token picks ``topk`` distinct experts, uniformly or with Zipf-skewed
popularity (expert popularity ~ 1 / rank^ZIPF_S over a seeded permutation of the experts). Expert e
lives on rank e // (experts / world). ``shifted`` routing draws node 0's tokens uniformly and gives
node n the same tokens routed to the experts n nodes further on: statistically uniform per node
but identical on every node up to the node shift, so the op is node-symmetric and a collapsed
simulation of 64 nodes runs one (what uniform and Zipf routing, drawn per rank, are not).
``zipf_shifted`` does the same with node 0's tokens drawn by Zipf popularity: each node's tokens
favour the same experts, moved n nodes on. What it keeps of Zipf's skew: the hot experts' GPUs
(their local index) take more rows than the others, on every node alike; what it loses: one GPU
hot for the whole cluster (every node's load is the same). Zipf drawn per rank stays the fully
random case, simulated whole.

``multinomial`` is the routing the paper's MoE bench draws (uccl-project/mKernel
bench/dispatch_gemm_bench.py, its default ``MKERNEL_DISPATCH_GEMM_ROUTING=multinomial``, "bit-equivalent
to NCCL/TritonDist baselines"): one weight per expert uniform in [0, 1), then every token of the
whole cluster picks ``topk`` distinct experts in proportion to the weights (``torch.multinomial``
without replacement; here Gumbel top-k on the log weights, the same distribution from numpy's
generator, so not the bench's exact draw). Token t of the cluster is token t mod (m / world) of rank
t // (m / world). The weights are shared by every token, so some GPUs' experts are busier on every
node alike (the busiest GPU of a 2 x 8 draw takes about 1.2-1.3x the mean rows); drawn per token
over the cluster, it is not node-symmetric and is simulated whole.

The layout on destination rank d: for each local expert j in order, for each source rank in
``source_order(d)`` (own, node peers, then other nodes nearest first), the tokens of that source
routed to that expert, ascending. Its rows are where the dispatch writes and the GEMM reads.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .problems import Workload

ZIPF_S = 1.2
SHIFTED = ("shifted", "zipf_shifted")  # the node-symmetric routings: node 0's, shifted for every node


def route(w: Workload, world: int, gpus_per_node: int) -> list[np.ndarray]:
    """Per source rank, a (tokens per rank x topk) array of expert ids: ``w.routes`` when given,
    else drawn from the seed."""
    if w.routes:
        return [np.asarray(r, dtype=np.int64).reshape(-1, w.topk) for r in w.routes]
    rng = np.random.default_rng(w.routing_seed)
    per = w.m // world
    if w.routing in ("zipf", "zipf_shifted"):
        popularity = 1.0 / np.arange(1, w.experts + 1) ** ZIPF_S
        logits = np.log(popularity[rng.permutation(w.experts)])
    elif w.routing == "multinomial":  # the bench's torch.rand weights (a zero weight: never picked)
        with np.errstate(divide="ignore"):
            logits = np.log(rng.random(w.experts))
    else:
        logits = np.zeros(w.experts)
    drawn = gpus_per_node if w.routing in SHIFTED else world
    out = []
    for _ in range(drawn):  # Gumbel top-k: topk distinct experts, each drawn by popularity
        keys = -(logits[None, :] + rng.gumbel(size=(per, w.experts)))
        out.append(_smallest(keys, w.topk))
    if w.routing in SHIFTED:  # node n: node 0's choices, n nodes' worth of experts further on
        per_node = (w.experts // world) * gpus_per_node
        out = [(out[r % gpus_per_node] + (r // gpus_per_node) * per_node) % w.experts for r in range(world)]
    return out


def _smallest(keys: np.ndarray, k: int) -> np.ndarray:
    """Per row, the indices of its ``k`` smallest keys in ascending order of key: what
    ``argsort(keys)[:, :k]`` gives for distinct keys (Gumbel draws are), without sorting whole rows."""
    if k >= keys.shape[1]:
        return np.argsort(keys, axis=1)[:, :k]
    top = np.argpartition(keys, k - 1, axis=1)[:, :k]
    return np.take_along_axis(top, np.argsort(np.take_along_axis(keys, top, axis=1), axis=1), axis=1)


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


class Routing:
    """One routing's token sets, computed on demand: builders of the first nodes alone ask only
    for those nodes' destinations, so 512 ranks cost what their questions cost."""

    def __init__(self, w: Workload, nodes: int, gpn: int) -> None:
        self.nodes, self.gpn, self.world = nodes, gpn, nodes * gpn
        self.per_gpu, self.experts = w.experts // self.world, w.experts
        self.routes = route(w, self.world, gpn)
        self._segments: dict[int, list[Segment]] = {}  # destination -> its segments
        self._by_source: dict[int, dict[int, list[Segment]]] = {}  # destination -> source -> segments
        self._by_expert: dict[int, dict[int, tuple[int, ...]]] = {}  # expert -> source -> its tokens
        self._sorted: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # (order, starts, offsets)

    def _tokens(self, e: int) -> dict[int, tuple[int, ...]]:
        """Expert e's tokens: source rank -> its tokens routed to e, ascending. Found from one
        stable sort of every route by expert, for the experts asked for alone."""
        if e not in self._by_expert:
            if self._sorted is None:
                flat = np.concatenate([r.ravel() for r in self.routes])
                keys = flat.astype(np.uint16) if flat.max(initial=0) < 2 ** 16 else flat  # 16 bits: a radix sort
                starts = np.concatenate(([0], np.cumsum(np.bincount(flat, minlength=self.experts))))
                offsets = np.cumsum([r.size for r in self.routes])
                self._sorted = (np.argsort(keys, kind="stable"), starts, offsets)
            order, starts, offsets = self._sorted
            at = order[starts[e]:starts[e + 1]]  # expert e's flat positions, ascending
            sources = np.searchsorted(offsets, at, side="right")
            tokens = ((at - np.concatenate(([0], offsets))[sources]) // self.routes[0].shape[1]).tolist()
            found, first = np.unique(sources, return_index=True)
            ends = [*first[1:].tolist(), len(tokens)]
            self._by_expert[e] = {r: tuple(tokens[a:z]) for r, a, z in zip(found.tolist(), first.tolist(), ends)}
        return self._by_expert[e]

    def segments(self, d: int) -> list[Segment]:
        """Destination d's segments in row order."""
        if d not in self._segments:
            segs, row = [], 0
            for j in range(self.per_gpu):
                by_source = self._tokens(d * self.per_gpu + j)
                for r in source_order(d, self.nodes, self.gpn):
                    tokens = by_source.get(r)
                    if tokens:
                        segs.append(Segment(d, j, r, row, tokens))
                        row += len(tokens)
            self._segments[d] = segs
        return self._segments[d]

    def from_source(self, d: int, r: int) -> list[Segment]:
        """Destination d's segments whose tokens come from source r."""
        if d not in self._by_source:
            index: dict[int, list[Segment]] = {}
            for seg in self.segments(d):
                index.setdefault(seg.source, []).append(seg)
            self._by_source[d] = index
        return self._by_source[d].get(r, [])

    def rows(self, d: int) -> int:
        return sum(len(s.tokens) for s in self.segments(d))

    def pairs_to(self, r: int) -> np.ndarray:
        """Per destination rank, how many (token, expert) rows of source r go there: the rows of
        every ``from_source(d, r)`` segment, for every d at once (without the segments)."""
        gpu = (self.routes[r] // self.per_gpu).ravel()
        return np.bincount(gpu[gpu < self.world], minlength=self.world)

    def tokens_to(self, r: int) -> np.ndarray:
        """Per destination rank d, how many of source r's tokens go there: ``len(to_ranks(r, d, d + 1))``
        for every d at once."""
        gpu = np.minimum(self.routes[r] // self.per_gpu, self.world)
        hit = np.zeros((gpu.shape[0], self.world + 1), dtype=bool)
        hit[np.arange(gpu.shape[0])[:, None], gpu] = True
        return hit[:, :self.world].sum(axis=0)

    def to_ranks(self, r: int, first: int, last: int) -> tuple[int, ...]:
        """Source r's tokens routed to any expert on ranks first..last-1, ascending."""
        gpu = self.routes[r] // self.per_gpu
        return tuple(int(t) for t in np.nonzero(((gpu >= first) & (gpu < last)).any(axis=1))[0])


@lru_cache(maxsize=2)
def routing_for(w: Workload, nodes: int, gpn: int) -> Routing:
    """One :class:`Routing` per workload and cluster shape, shared by the builds of one run (fused,
    baseline, paper baseline): each drew the routes again and sorted them (0.6 s at 64 x 8). What
    it computes on demand are pure functions of the routes, so sharing them changes nothing."""
    return Routing(w, nodes, gpn)


def layout(w: Workload, nodes: int, gpn: int) -> tuple[list[list[Segment]], int]:
    """Per destination rank its segments in row order, and the largest row count over ranks."""
    routing = Routing(w, nodes, gpn)
    segments = [routing.segments(d) for d in range(routing.world)]
    return segments, max((routing.rows(d) for d in range(routing.world)), default=0)
