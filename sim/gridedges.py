"""The row and column edges of the hazard tracker's grids (:mod:`mkernel.sim.cellgrid`): every grid's
edges in one sorted array of keys, and a row bound's index among its grid's edges, found by marking
the keys where they are few enough and by sorting where not (see :class:`Edges`); the rows keyed
from their records (:class:`Stepped`) and a side's rows as edge indices (:class:`Span`)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np


CHUNK = 1 << 17  # rows a time where a row-sized temporary would raise the set-up's peak (Stepped.keys)


@dataclass
class Stepped:
    """Every row of one side along one axis, keyed from its record rather than listed: row j's
    bounds are ``lo[rec[j]] + step[rec[j]] * off[j]`` and ``hi``'s likewise, in its record's grid
    (no row steps in rank). ``least``, ``most``: per record, the least and most ``step * off`` of
    its rows, so the bounds' extremes, which lay the grids out, are known without the bounds."""

    grid: np.ndarray  # per record
    lo: np.ndarray
    hi: np.ndarray
    step: np.ndarray
    rec: np.ndarray  # per row
    off: np.ndarray
    least: np.ndarray  # per record
    most: np.ndarray

    def keys(self, start: np.ndarray, shift: int) -> list[np.ndarray]:
        """Every row's two keys among slots ``start`` (:class:`Slots`): each record's own, plus its
        step times the row's offset, all divided by ``2 ** shift`` (of which the bounds and steps
        are multiples, so each divides exactly). Where every record is as wide (the 2 x 8 GEMM+AR's
        columns: each a tile), the second keys are given as that width (an int): the first keys
        moved by it, which :class:`Edges` marks and looks up as a whole (not key by key)."""
        lo = np.take(start[self.grid] + (self.lo >> shift), self.rec)  # (np.take: see Slots.index)
        # plus each row's step times its offset, multiplied and added in place (a row-sized array's fresh pages
        # cost about a pass over it), the steps made 64-bit first (32-bit ones times the 64-bit offsets are
        # cast item by item: twice the time of the product); a chunk of rows at a time, so the products are
        # a chunk's, not a second row-sized array (the set-up's peak of memory is here, its fresh pages its faults)
        step = (self.step >> shift).astype(np.int64)
        for a in range(0, len(lo), CHUNK):
            moved = np.take(step, self.rec[a:a + CHUNK])
            moved *= self.off[a:a + CHUNK]
            lo[a:a + CHUNK] += moved
        wide = (self.hi.astype(np.int64) - self.lo) >> shift
        if len(wide) and wide[0] >= 0 and (wide == wide[0]).all():
            return [lo, int(wide[0])]
        return [lo, lo + np.take(wide, self.rec)]


@dataclass
class Span:
    """One side's rows along one axis, as edge indices among every grid's (:meth:`Edges.index`):
    each record's own two (member 0's: those of a row whose record steps neither in rank nor along
    the axis), and those of the rows that step (``at``, their indices; None: every row, and no
    record's)."""

    lo: np.ndarray | None  # per record
    hi: np.ndarray | None
    at: np.ndarray | None
    x0: np.ndarray  # per row of ``at``
    x1: np.ndarray | int  # (an int, where ``at`` is None: every row's ``x0`` plus it, :meth:`Edges.found`)

    def full(self, rec: np.ndarray) -> tuple[np.ndarray, np.ndarray | int]:
        """Every row's two (``rec``: each row's record); the second as ``x1`` gives it (an int: the first plus it)."""
        if self.at is None:
            return self.x0, self.x1
        x0, x1 = np.take(self.lo, rec), np.take(self.hi, rec)
        x0[self.at], x1[self.at] = self.x0, self.x1
        return x0, x1


class Edges:
    """The row (or column) edges of every grid, in one sorted array of keys: grid g's edge x is
    ``offset[g] + x``, the grids laid end to end, each as wide as the widest or, where that leaves
    too many keys to mark, as its own largest edge. Where the possible keys are few (a GEMM's
    columns: 64 grids of 32k columns, against 4M edge values), :meth:`local` reads how many edges
    lie below a key from a table (a gather, where ``searchsorted`` over the edges cost 40 ns a key).

    The keys are found by marking them, or where too many to mark, by sorting them; as every edge
    value is a multiple of a power of two (their lowest common bit: 128 for the 2 x 8 GEMM+AR's rows,
    a tile's), they are marked and looked up divided by it, each grid's share of the key space
    divided alike (``Slots``): exact, as the division keeps every edge and the edges' order, and
    that space is small (the GEMM+AR's rows: 172k slots, not 22M keys; its columns: 8k, not 2M)."""

    def __init__(self, grids: list[np.ndarray], values: list[np.ndarray], count: int, size: int | None = None) -> None:
        """The edges ``values`` (arrays) of grids ``grids`` (alike), of ``count`` grids. ``size``: how
        many edge values there are, where some are listed twice (a row's that are its record's). (Every
        value listed: the tests' reference for :meth:`found`, which the grids are made by.)"""
        self._build(list(grids), list(values), count, size, [False] * len(values))

    @classmethod
    def found(cls, grids: list[np.ndarray], values: list[np.ndarray], count: int, size: int,
              wanted: list[bool], stepped: list[Stepped]) -> tuple[Edges, list[np.ndarray | None]]:
        """The edges of ``values`` and of the rows ``stepped``, and the :meth:`index` of each value
        array ``wanted`` names, then of each of ``stepped``'s two bounds, looked up by the keys they
        were marked by (``values``, ``grids``: emptied as they are read). A stepped side's second
        bounds whose indices are all its first's plus one number (its rows of one width: the 2 x 8
        GEMM+AR's columns, a tile each) are given as that int, not listed (a row-sized array less)."""
        edges = cls.__new__(cls)
        return edges, edges._build(grids, values, count, size, wanted, stepped)

    def _build(self, grids: list, values: list, count: int, size: int | None, wanted: list[bool],
               stepped: list[Stepped] = ()) -> list:
        ends = [(np.minimum(st.lo, st.hi) + st.least, np.maximum(st.lo, st.hi) + st.most) for st in stepped]
        span = 1 + max([0] + [int(v.max()) for v in values + [e[1] for e in ends] if v.size])
        size = sum(v.size for v in values) if size is None else size
        start = np.arange(count + 1, dtype=np.int64) * span  # each grid as wide as the widest
        low = min([0] + [int(v.min()) for v in values + [e[0] for e in ends] if v.size])
        if size and count * span > 4 * size and low >= 0:
            top = np.full(count, -1, np.int64)  # too wide to mark at once: each grid as wide as its own edges
            for g, v in _paired(grids + [st.grid for st in stepped], values + [e[1] for e in ends]):
                np.maximum.at(top, g, v.astype(np.int64, copy=False))  # (of one dtype: ufunc.at casting is 100x slower)
            np.cumsum(top + 1, out=start[1:])  # (a grid without edges: 0 wide)
        self.offset = start[:-1]
        self._span = span if start[-1] == count * span else 0  # (every grid as wide: keys by a product, not a gather)
        space = int(start[-1])
        slots = Slots(start, values + [st.lo | st.hi | st.step for st in stepped] if low >= 0 else [])
        keys, last = [], None
        for j in range(len(values)):  # (marked piece by piece: not joined)
            if grids[j] is not last:  # (a grid array's start looked up once for both the bounds it is listed for)
                last, first = grids[j], slots.key(grids[j], 0) if slots.shift else self._key(grids[j], 0)
            keys.append(first + (values[j] >> slots.shift))
            grids[j] = values[j] = None
        moved = {}  # a stepped side's second keys given as a width (Stepped.keys): by index, that width
        for st in stepped:
            lo, hi = st.keys(slots.start, slots.shift)
            if isinstance(hi, int):
                moved[len(keys) + 1], hi = hi, lo  # (its own first keys, moved where marked and looked up)
            keys += [lo, hi]
            wanted = wanted + [True, True]
        # the least key, read for its sign alone: where no value or stepped bound is below 0 (low), no key is
        # (a grid's first slot plus a value divided, or moved by a width >= 0), so the keys are not scanned
        least = 0 if low >= 0 else min([0] + [int(k.min()) + moved.get(j, 0) for j, k in enumerate(keys) if k.size])
        own = {}  # per moved side: the slots of its first keys, marked
        if size and slots.space <= 32 * size and least >= 0:
            mark = np.zeros(slots.space, bool)
            for j, k in enumerate(keys):
                if j + 1 in moved:  # (marked apart, then joined as they are and moved)
                    own[j + 1] = at = np.zeros(slots.space, bool)
                    at[k] = True
                    mark |= at
                    mark[moved[j + 1]:] |= at[:slots.space - moved[j + 1]]  # (a width >= 0: least >= 0 where it is not)
                elif j not in moved:
                    mark[k] = True
            slots.u = np.flatnonzero(mark)
        else:
            for j, w in moved.items():
                keys[j] = keys[j] + w
            moved = {}
            slots.u = np.unique(np.concatenate(keys))
        self.u = slots.keys()
        self._space = space if size and space <= 4 * size and (low >= 0 or least >= 0) else None  # (_below's)
        self.first = np.searchsorted(self.u, start)
        self.cells = np.maximum(np.diff(self.first) - 1, 0)  # per grid
        found = []
        for j in range(len(keys)):  # (each key array let go once looked up, where no moved one reads it after)
            found.append(slots.index(keys[j], 4 * size) if wanted[j] and j not in moved else None)
            if j not in moved and j + 1 not in moved:
                keys[j] = None
        for j, w in moved.items():  # the edges between a first key and its moved one: alike for every slot marked?
            at = np.flatnonzero(own[j])
            between = slots.index(at + w, 4 * size) - slots.index(at, 4 * size)
            alike = len(between) and (between == between[0]).all()
            found[j] = int(between[0]) if alike else slots.index(keys[j] + w, 4 * size)
        return found

    @cached_property
    def _below(self) -> np.ndarray | None:
        """Per key: how many edges lie below it, where the keys are few enough (``_space``, at most four
        per edge value), else None. Made where first read (:meth:`index`: only reports and the tests
        look edges up by value): the 2 x 8 GEMM+AR every-node build's columns' is 8.4 MB of fresh pages."""
        space = self._space
        if space is None:
            return None
        runs = np.diff(self.u, prepend=-1, append=space)  # key k has j edges below it for u[j-1] < k <= u[j]
        return np.repeat(np.arange(len(self.u) + 1, dtype=np.int32 if space < 2 ** 31 else np.int64), runs)

    def local(self, g: int | np.ndarray, x: int | np.ndarray) -> np.ndarray:
        """The index of edge ``x`` among grid ``g``'s edges (both may be arrays; ``x`` one of them)."""
        return self.index(g, x) - self.first[g]

    def index(self, g: int | np.ndarray, x: int | np.ndarray) -> np.ndarray:
        """The index of grid ``g``'s edge ``x`` among every grid's edges: its :meth:`local` index plus
        ``first[g]`` (a row's cells are worked out from these: :meth:`Cells._cells`)."""
        key = self._key(g, x)
        below = self._below
        if below is not None and np.size(key) and 0 <= np.min(key) and np.max(key) < len(below):
            return below[key]
        return np.searchsorted(self.u, key)

    def _key(self, g: int | np.ndarray, x: int | np.ndarray) -> np.ndarray:
        return g * self._span + x if self._span else self.offset[g] + x


def _paired(grids: list[np.ndarray], values: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    """(grids, values) of ``values``, each two in a row of one grid array (a row's two bounds) taken as their
    larger (:meth:`Edges._build` wants each grid's largest edge: one ufunc.at of ~10 instructions an item
    for both, after a maximum of one)."""
    out, j = [], 0
    while j < len(values):
        if j + 1 < len(values) and grids[j + 1] is grids[j] and values[j].shape == values[j + 1].shape:
            out.append((grids[j], np.maximum(values[j], values[j + 1])))
            j += 2
        else:
            out.append((grids[j], values[j]))
            j += 1
    return out


class Slots:
    """The key space of :class:`Edges` divided by ``2 ** shift``, the lowest bit set in any edge
    value (so every value is a multiple of it; 0 where some value is negative): grid g's value x is
    slot ``start[g] + (x >> shift)``, each grid's share of the keys divided alike (rounded up). The
    slots keep the edges' order and tell them apart, so the edges' slots (``u``), marked or sorted,
    give their keys (:meth:`keys`), and an edge's count of the edge slots below its own is its count
    of the edges below it (:meth:`index`). Made while the edges are, and let go after."""

    def __init__(self, start: np.ndarray, values: list[np.ndarray]) -> None:
        bits = 0
        for v in values:
            bits |= int(np.bitwise_or.reduce(v)) if v.size else 0
        self.shift = (bits & -bits).bit_length() - 1 if bits else 0
        self.key_start, self.start, self.width = start, start, np.diff(start)  # (shift 0: the keys themselves)
        if self.shift:
            self.width = ((self.width - 1) >> self.shift) + 1  # (0 where a grid has no keys)
            self.start = np.zeros(len(start), np.int64)
            np.cumsum(self.width, out=self.start[1:])
        self.space = int(self.start[-1])
        self.u = np.zeros(0, np.int64)
        self._below: np.ndarray | None = None  # (index's table)

    def key(self, g: int | np.ndarray, x: int | np.ndarray) -> np.ndarray:
        return self.start[g] + (x >> self.shift)

    def keys(self) -> np.ndarray:
        """The edges' keys, from their slots ``u``."""
        if not self.shift:
            return self.u
        g = np.searchsorted(self.start, self.u, "right") - 1
        return self.key_start[g] + ((self.u - self.start[g]) << self.shift)

    def index(self, slot: np.ndarray, most: int) -> np.ndarray:
        """How many edges lie below each of these edges' slots: from a table of every slot where
        there are at most ``most``, else by a search. (The table read by :func:`numpy.take`, as the
        tracker's other big gathers are: a 1-D gather by a 64-bit index array in about two thirds of
        the time of indexing, which goes through numpy's general index machinery; by a 32-bit one, half.)"""
        if self.space > most or (len(self.u) and self.u[0] < 0):  # (negative keys: some value below 0)
            return np.searchsorted(self.u, slot)
        if self._below is None:  # slot s has j edge slots below it for u[j-1] < s <= u[j]
            runs = np.diff(self.u, prepend=-1, append=self.space)
            dtype = np.int32 if self.space < 2 ** 31 else np.int64
            self._below = np.repeat(np.arange(len(self.u) + 1, dtype=dtype), runs)
        return np.take(self._below, slot)
