"""Data mode on a sample of every buffer's rows and columns, so that large shapes check in seconds.

Data mode checks a schedule's dataflow: every output element gets every contribution once, from the
right place. Holding every rank's arrays at M = N = 8192 on 16 ranks takes over 10 GB and hours of
float32 GEMMs on a small machine; but every op here treats rows and columns separably. A GEMM's
output element (i, j) needs row i of A and column j of B, a copy, sum or network put moves element
(i, j) to (i + di, j + dj), a gather moves whole rows, attention needs one query row and every key.
So a :class:`Plan` keeps, per buffer axis, a set of indices, and the simulator's data store
(:class:`mkernel.sim.data.DataStore`) holds and computes only those rows and columns.

The plan is consistent by construction: axes that an op links (a GEMM's output rows and A's rows,
a copy's source and destination) share one pattern, and where regions are moved by offsets the
pattern is periodic with a period dividing every offset. Axes an op contracts or gathers from (A's
columns, B's rows, attention's keys, a gather's source rows) are kept whole. Every region's first
and last row and column are kept, so a task that writes nothing, or the wrong place, shows; a
seeded sample of the interior is added. Input values are a counter-based hash of (seed, buffer,
rank, row, column), so the oracle (:mod:`mkernel.sampled_oracle`) draws exactly the entries it needs.
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable

import numpy as np

from .ir import BufferKind, Op, Region, Schedule

STRIDE = 61  # an aperiodic axis keeps every STRIDE-th index besides region ends (prime: no aliasing)
EXTRA = 2  # interior residues a periodic axis keeps besides region ends
WHOLE_FRACTION = 0.5  # an axis that would keep more than this share is kept whole
Node = tuple[str, int]  # (buffer name, axis 0 = rows or 1 = columns)


class _Links:
    """Union-find over buffer axes, with per component: kept whole?, the gcd of offsets, ends seen."""

    def __init__(self) -> None:
        self.parent: dict[Node, Node] = {}
        self.whole: set[Node] = set()
        self.period: dict[Node, int] = {}
        self.ends: dict[Node, set[int]] = {}

    def find(self, x: Node) -> Node:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def link(self, a: Node, b: Node, offset: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra
            if rb in self.whole:
                self.whole.add(ra)
            self.period[ra] = math.gcd(self.period.get(ra, 0), self.period.pop(rb, 0))
            self.ends.setdefault(ra, set()).update(self.ends.pop(rb, set()))
        self.period[ra] = math.gcd(self.period.get(ra, 0), abs(offset))

    def keep_whole(self, x: Node) -> None:
        self.whole.add(self.find(x))

    def region(self, r: Region) -> None:
        for axis, lo, hi in ((0, r.row0, r.row1), (1, r.col0, r.col1)):
            if hi > lo:
                self.ends.setdefault(self.find((r.buffer, axis)), set()).update((lo, hi - 1))


def _shapes(regions) -> tuple[Region, ...]:
    return tuple(Region(r.buffer, 0, r.row0, r.row1, r.col0, r.col1) for r in regions)


def _axes(r: Region) -> tuple[tuple[Node, int], tuple[Node, int]]:
    return ((r.buffer, 0), r.row0), ((r.buffer, 1), r.col0)


def _tie(links: _Links, a: Region, b: Region, rows: bool = True, cols: bool = True) -> None:
    (ar, a0), (ac, a1) = _axes(a)
    (br, b0), (bc, b1) = _axes(b)
    if rows:
        links.link(ar, br, b0 - a0)
    if cols:
        links.link(ac, bc, b1 - a1)


def _constrain(links: _Links, op: Op, reads: tuple[Region, ...], writes: tuple[Region, ...]) -> None:
    for r in (*reads, *writes):
        links.region(r)
    if op is Op.GEMM:
        a, b = reads
        c = writes[0]
        _tie(links, a, c, cols=False)
        _tie(links, b, c, rows=False)
        links.keep_whole((a.buffer, 1))
        links.keep_whole((b.buffer, 0))
    elif op is Op.GATHER:
        _tie(links, reads[0], writes[0], rows=False)
        links.keep_whole((reads[0].buffer, 0))
    elif op is Op.ATTN:
        q, k, v = reads
        acc, stats = writes
        _tie(links, q, acc, cols=False)
        _tie(links, q, stats, cols=False)
        _tie(links, v, acc, rows=False)
        for node in ((q.buffer, 1), (k.buffer, 0), (k.buffer, 1), (v.buffer, 0), (stats.buffer, 1)):
            links.keep_whole(node)
    elif op is Op.NORM:
        acc, stats = reads
        out, lse = writes
        _tie(links, acc, out)
        _tie(links, acc, stats, cols=False)
        _tie(links, acc, lse, cols=False)
        for node in ((stats.buffer, 1), (lse.buffer, 1)):
            links.keep_whole(node)
    elif op is Op.REDUCE:
        for r in reads:
            _tie(links, r, writes[0])
    elif op in (Op.COPY, Op.PUT):
        for r, w in zip(reads, writes):
            _tie(links, r, w)


class Plan:
    """The kept indices of every buffer axis of one schedule (None: the whole axis)."""

    def __init__(self, schedule: Schedule, keep: dict[Node, np.ndarray | None]) -> None:
        self.schedule = schedule
        self.keep = keep
        self._spans: dict[tuple, slice] = {}  # the data store asks for the same regions again and again

    @classmethod
    def whole(cls, schedule: Schedule) -> Plan:
        """Every index kept: data mode on every element."""
        return cls(schedule, {(b.name, a): None for b in schedule.buffers for a in (0, 1)})

    def indices(self, name: str, axis: int) -> np.ndarray:
        kept = self.keep[(name, axis)]
        if kept is not None:
            return kept
        buf = self.schedule.buffer(name)
        return np.arange(buf.rows if axis == 0 else buf.cols)

    def shape(self, name: str) -> tuple[int, int]:
        buf = self.schedule.buffer(name)
        return tuple(len(k) if k is not None else n for k, n in zip((self.keep[(name, 0)], self.keep[(name, 1)]),
                                                                     (buf.rows, buf.cols)))

    def span(self, name: str, axis: int, lo: int, hi: int) -> slice:
        """Where indices [lo, hi) of the axis sit in the kept array."""
        found = self._spans.get((name, axis, lo, hi))
        if found is None:
            kept = self.keep[(name, axis)]
            found = slice(lo, hi) if kept is None else slice(int(np.searchsorted(kept, lo)),
                                                             int(np.searchsorted(kept, hi)))
            self._spans[(name, axis, lo, hi)] = found
        return found

    def offsets(self, name: str, axis: int, lo: int, hi: int) -> np.ndarray:
        """The kept indices in [lo, hi), less lo."""
        kept = self.keep[(name, axis)]
        return np.arange(hi - lo) if kept is None else kept[self.span(name, axis, lo, hi)] - lo

    def elements(self, kinds: Iterable[BufferKind] = tuple(BufferKind)) -> int:
        """Kept elements over every rank of the buffers of ``kinds``."""
        kinds = tuple(kinds)
        return sum(math.prod(self.shape(b.name)) for b in self.schedule.buffers if b.kind in kinds) * self.schedule.world

    def fraction(self, kind: BufferKind = BufferKind.OUTPUT) -> float:
        full = sum(b.rows * b.cols for b in self.schedule.buffers if b.kind is kind) * self.schedule.world
        return self.elements((kind,)) / full if full else 1.0


def plan(schedule: Schedule, seed: int = 0) -> Plan:
    """The sample of every buffer axis of ``schedule`` (see the module docstring)."""
    links = _Links()
    for b in schedule.buffers:
        for axis in (0, 1):
            links.find((b.name, axis))
    # every member of a group: its regions step from member 0's, so the offsets and ends that decide
    # the patterns are its members' (member 0's alone left a grouped reduction's sources unlinked)
    members = (m for t in schedule.tasks for m in (t.members() if t.count > 1 else (t,)))
    for op, reads, writes in {(t.op, _shapes(t.reads), _shapes(t.writes)) for t in members}:
        _constrain(links, op, reads, writes)  # ranks do not matter: each distinct task shape once
    rng = np.random.default_rng(seed ^ 0x5A3D)
    pattern: dict[Node, tuple[int, np.ndarray] | None] = {}
    keep: dict[Node, np.ndarray | None] = {}
    for b in schedule.buffers:
        for axis, size in ((0, b.rows), (1, b.cols)):
            root = links.find((b.name, axis))
            if root not in pattern:
                pattern[root] = None if root in links.whole else _pattern(links, root, rng)
            keep[(b.name, axis)] = _indices(pattern[root], size)
    return Plan(schedule, keep)


def _pattern(links: _Links, root: Node, rng: np.random.Generator) -> tuple[int, np.ndarray] | None:
    """(period, kept residues) of a component; period 0: aperiodic, the residues are the indices."""
    period, ends = links.period.get(root, 0), links.ends.get(root, set())
    if period == 0:  # (an axis no task touches has no ends: the stride alone)
        top = max(ends, default=0) + 1
        kept = np.union1d(np.fromiter(ends, dtype=np.int64), np.arange(0, top, STRIDE))
        return None if ends and len(kept) > WHOLE_FRACTION * top else (0, kept)
    residues = {e % period for e in ends}
    if period > 2:
        residues.update(int(x) for x in rng.integers(1, period - 1, size=EXTRA))
    if len(residues) > WHOLE_FRACTION * period:
        return None
    return period, np.array(sorted(residues), dtype=np.int64)


def _indices(pattern: tuple[int, np.ndarray] | None, size: int) -> np.ndarray | None:
    if pattern is None:
        return None
    period, residues = pattern
    if period == 0:
        kept = np.union1d(residues[residues < size], np.arange(0, size, STRIDE))
    else:
        kept = np.nonzero(np.isin(np.arange(size) % period, residues))[0]
    return None if len(kept) > WHOLE_FRACTION * size else kept.astype(np.int64)


# -- input values: a counter-based hash, so any entry can be drawn on its own --------------------
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, elementwise on uint64."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def _key(seed: int, name: str, rank: int) -> np.uint64:
    return np.uint64(int.from_bytes(hashlib.blake2b(f"{seed}/{name}/{rank}".encode(), digest_size=8).digest(), "little"))


def values(seed: int, name: str, rank: int, cols_total: int, rows: np.ndarray, cols: np.ndarray,
           scale: float = 1.0) -> np.ndarray:
    """float32 entries (rows x cols) of input ``name`` on ``rank``: uniform with unit variance times
    ``scale``, a pure function of (seed, name, rank, row, column)."""
    with np.errstate(over="ignore"):
        flat = rows.astype(np.uint64)[:, None] * np.uint64(cols_total) + cols.astype(np.uint64)[None, :]
        bits = _mix(flat ^ _key(seed, name, rank)) >> np.uint64(40)  # 24 bits: exact in float32
    unit = bits.astype(np.float32) * np.float32(1.0 / (1 << 24)) - np.float32(0.5)
    return unit * np.float32(math.sqrt(12.0) * scale)
