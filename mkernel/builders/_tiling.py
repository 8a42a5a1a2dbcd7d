"""Tile grids, row splits and chunking, written once for every builder.

Shapes that do not divide the tile size get smaller edge tiles; nothing is padded or refused.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..ir import Step
from ..slots import settable


@dataclass(frozen=True, slots=True)
class Tile:
    """Output tile ``index`` covering rows ``[row0, row1)`` and columns ``[col0, col1)``, ``rows`` x
    ``cols`` (kept, not derived: a large build reads a tile's width half a million times)."""

    index: int
    row0: int
    row1: int
    col0: int
    col1: int
    rows: int
    cols: int


_SETTABLE_TILE = settable(Tile)  # (tile_grid's tiles, filled inline: a 32768^2 grid has 32k tiles)


@lru_cache(maxsize=8)
def tile_grid(m: int, n: int, tile_m: int, tile_n: int) -> tuple[Tile, ...]:
    """Row-major tiles of an ``m x n`` matrix; the last row and column of tiles may be smaller.
    Kept for the last few shapes (a tuple of frozen tiles): a build asks for its grid once per rank
    and in its plan, and a 32768^2 grid of 128 x 256 tiles takes 0.1 s to make."""
    spans = [(c0, min(n, c0 + tile_n), min(n, c0 + tile_n) - c0) for c0 in range(0, n, tile_n)]  # (each column's
    # bounds worked out once, not once a tile; the tiles made inline, slots.settable: a Tile's constructor call cost a fifth more)
    tiles: list[Tile] = []
    append, settable_tile, i = tiles.append, _SETTABLE_TILE, 0
    for r0 in range(0, m, tile_m):
        r1 = min(m, r0 + tile_m)
        height = r1 - r0
        for c0, c1, width in spans:
            t = settable_tile()
            t.index, t.row0, t.row1 = i, r0, r1  # (3 at once at most: more build a tuple)
            t.col0, t.col1, t.rows = c0, c1, height
            t.cols = width
            t.__class__ = Tile
            append(t)
            i += 1
    return tuple(tiles)


@lru_cache(maxsize=8)
def grid_runs(m: int, n: int, tile_m: int, tile_n: int) -> tuple[tuple[Tile, ...], ...]:
    """``runs(tile_grid(...))``: a whole grid's row runs, kept like the grid (each rank of a
    baseline's GEMM launch takes the same). Cut as slices of the grid, told from its shape: each
    tile row is one run, but a narrow last column (n not a multiple of tile_n) is a run of its own
    (runs walked a 32768^2 grid's 32k tiles one by one in the GEMM+AR row's baseline build)."""
    tiles, cols = tile_grid(m, n, tile_m, tile_n), -(-n // tile_n)
    if not tiles:
        return ()
    cuts = (0, cols - 1, cols) if n % tile_n and cols > 1 else (0, cols)
    return tuple(tiles[row + a:row + b] for row in range(0, len(tiles), cols) for a, b in zip(cuts, cuts[1:]))


def split_rows(row0: int, row1: int, parts: int) -> list[tuple[int, int]]:
    """Split ``[row0, row1)`` into ``parts`` contiguous near-equal ranges (the first ones larger)."""
    total = row1 - row0
    base, extra = divmod(total, parts)
    out, at = [], row0
    for i in range(parts):
        size = base + (1 if i < extra else 0)
        out.append((at, at + size))
        at += size
    return out


def chunk_rows(row0: int, row1: int, rows_per_chunk: int) -> list[tuple[int, int]]:
    """Cut ``[row0, row1)`` into chunks of at most ``rows_per_chunk`` rows (none if empty)."""
    return [(r, min(row1, r + rows_per_chunk)) for r in range(row0, row1, rows_per_chunk)]


def baseline_rows_per_chunk(chunk_kib: int, cols: int, dtype_bytes: int) -> int:
    """Rows of a ``cols``-wide operand in one message of an NCCL-style baseline's ``chunk_kib`` KiB
    chunks (at least one row)."""
    return max(1, (chunk_kib * 1024) // (cols * dtype_bytes))


def batches(items: list, size: int) -> list[list]:
    """Consecutive groups of ``size`` items (the last may be shorter)."""
    return [items[i:i + size] for i in range(0, len(items), size)]


def runs(tiles: list[Tile], stride: int = 1, period: int = 0) -> list[list[Tile]]:
    """Maximal runs of tiles ``stride`` apart in index (so ``stride`` tile widths apart) along one
    tile row, all of one shape: each can be one group whose members step by that many columns.
    With ``period``, a run also ends where the tile index reaches a multiple of it (a quantity that
    cycles with the index, such as the owner rank of a tile dealt round-robin, steps evenly only
    inside one cycle)."""
    out: list[list[Tile]] = []
    run: list[Tile] = []
    prev = None
    for t in tiles:  # (fields, not the properties: builders call this on every tile of large grids)
        if (prev is not None and t.index == prev.index + stride and t.row0 == prev.row0 and t.row1 == prev.row1
                and t.col1 - t.col0 == prev.col1 - prev.col0 and not (period and t.index % period == 0)):
            run.append(t)
        else:
            run = [t]
            out.append(run)
        prev = t
    return out


def strided_chunk_runs(m: int, n: int, tile_m: int, tile_n: int, first: int, stride: int,
                       size: int) -> list[list[list[Tile]]]:
    """``[runs(chunk, stride) for chunk in batches(list(tile_grid(...)[first::stride]), size)]``: the
    runs of each chunk of ``size`` of the grid's tiles from ``first`` on, ``stride`` apart (an
    owner's, dealt round-robin), told from the grid's shape on arrays and cut from one list of them.
    Why: a 2 x 8 GEMM+AR 32768^2 build cut 8k chunks of 4 tiles one by one, each with its call."""
    tiles = tile_grid(m, n, tile_m, tile_n)
    index = np.arange(first, len(tiles), stride)
    cols = -(-n // tile_n)
    row, col = index // cols, index % cols  # (one tile row: one row0 and row1)
    width = np.minimum(n, (col + 1) * tile_n) - col * tile_n
    start = np.ones(len(index), bool)
    start[1:] = (row[1:] != row[:-1]) | (width[1:] != width[:-1])  # (index steps by stride throughout)
    start[::size] = True  # (a chunk starts a run)
    starts = np.flatnonzero(start).tolist()
    owned = list(tiles[first::stride])
    cuts: list[list[list[Tile]]] = [[] for _ in range(0, len(owned), size)]
    for a, b in zip(starts, starts[1:] + [len(owned)]):
        cuts[a // size].append(owned[a:b])
    return cuts


def grid_order_runs(m: int, n: int, tile_m: int, tile_n: int, order: np.ndarray,
                    period: int = 0) -> list[tuple[int, int]]:
    """:func:`runs` (``stride`` 1) of the tiles of :func:`tile_grid` taken in the index order
    ``order``, as (first index, length) of each run (so each run is a slice of the grid): told from
    the grid's shape alone, on arrays. Why: a 2 x 8 GEMM+AR 32768^2 build cuts 16 ranks' orders of
    32k tiles each."""
    first, length = _order_runs(m, n, tile_m, tile_n, order, period)
    return list(zip(first.tolist(), length.tolist()))


def _order_runs(m: int, n: int, tile_m: int, tile_n: int, order: np.ndarray,
                period: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`grid_order_runs` as arrays: each run's first tile index and length."""
    if not len(order):
        return order, order
    cols = -(-n // tile_n)
    row = order // cols
    joins = (order[1:] == order[:-1] + 1) & (row[1:] == row[:-1])
    if n % tile_n:  # a narrow last column (a tile row's height is the row's; else every width is tile_n)
        col = order % cols
        width = np.minimum(n, (col + 1) * tile_n) - col * tile_n
        joins &= width[1:] == width[:-1]
    if period:
        joins &= order[1:] % period != 0
    starts = np.flatnonzero(np.concatenate(([True], ~joins)))
    return order[starts], np.diff(np.append(starts, len(order)))


def _wrapped_runs(m: int, n: int, tile_m: int, tile_n: int, order: np.ndarray,
                  period: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`grid_order_runs` cut at a ``period`` (an owner cycle), with each cycle taken from its
    tile l on (l .. period - 1, then 0 .. l - 1: a rank that takes a slot's tiles from its own) made
    one run that wraps, a group whose members wrap (``Step.rotate`` = l): where the two runs are the
    whole cycle, in one tile row, of one width. As arrays: each run's first tile index, length and
    rotate (a run that does not wrap is a slice of the grid, rotate 0). Why arrays: every rank but
    local 0 of a GEMM+AR takes each slot in two runs, 57k of a 2 x 8 32768^2 build's 123k GEMM
    groups, and joining them one by one cost a twentieth of that build."""
    first, length = _order_runs(m, n, tile_m, tile_n, order, period)
    if len(first) < 2:
        return first, length, np.zeros(len(first), np.int64)
    cols = -(-n // tile_n)
    row, col = first // cols, first % cols
    width = np.minimum(n, (col + 1) * tile_n) - col * tile_n
    a, b, la, lb = first[:-1], first[1:], length[:-1], length[1:]  # run b joins the run a before it:
    join = ((b % period == 0) & (a - b == lb) & (lb < period) & (la + lb == period)  # the rest of a's cycle,
            & (row[1:] == row[:-1]) & (width[1:] == width[:-1])  # in its row, of its width,
            & (col[1:] * tile_n + lb * width[1:] == col[:-1] * tile_n))  # ending where a starts
    # (a run joined never takes the next: a whole cycle has no rest)
    keep = np.concatenate(([True], ~join))
    whole = np.concatenate((join, [False]))[keep]  # each kept run: whether the next joined it
    first, length = first[keep], np.where(whole, period, length[keep])
    return first, length, np.where(whole, first % period, 0)


def cycled_order_runs(m: int, n: int, tile_m: int, tile_n: int, order: np.ndarray, period: int,
                      rel: np.ndarray) -> list[tuple[int, int, int, int]]:
    """:func:`_wrapped_runs` with the whole cycles that follow on joined into one run: a rank
    of a GEMM+AR takes a tile row slot by slot, each from its own tile on, so its row is one group
    whose owners cycle (``Step.period``) and wrap within each cycle (``Step.rotate``). Whole cycles
    join where their first tiles sit one ``period`` apart (so they have one rotate), in one tile
    row, of one width, and their signal indices (``rel``, per tile) are one ``period`` apart too.
    As (first index, length, rotate, cycles) of each run, cycles 0 for a run that is no whole
    cycle. Why: the 2 x 8 GEMM+AR 32768^2 build's 65k GEMM groups become 4k tile rows."""
    first, length, rotate = _wrapped_runs(m, n, tile_m, tile_n, order, period)
    if not len(first):
        return []
    whole = length == period  # (a run never crosses a cycle's start, so one of a period's length is a cycle)
    cols = -(-n // tile_n)
    row, width = first // cols, np.minimum(n, (first % cols + 1) * tile_n) - first % cols * tile_n
    index = rel[first]
    join = (whole[1:] & whole[:-1] & (first[1:] == first[:-1] + period)  # (so of one rotate: first mod period)
            & (row[1:] == row[:-1]) & (width[1:] == width[:-1]) & (index[1:] == index[:-1] + period))
    starts = np.flatnonzero(np.concatenate(([True], ~join)))
    runs_in = np.diff(np.append(starts, len(first)))
    total = np.add.reduceat(length, starts)
    return list(zip(first[starts].tolist(), total.tolist(), rotate[starts].tolist(),
                    np.where(whole[starts], runs_in, 0).tolist()))


def dealt_order_runs(m: int, n: int, tile_m: int, tile_n: int, g: int, ct: int, order: list[int], local: int,
                     rel: np.ndarray, cycled: bool, period: int, local_fold: bool) -> list[tuple[Tile, int, int, int]]:
    """The compute groups of owner ``local`` of a grid dealt round-robin to ``g`` owners, slot by
    slot (a slot: G tiles), in chunks of ``ct`` slots visited in ``order`` (GEMM+AR's; ``rel``: each
    tile's signal index there): the tiles slot-major in that order, the own tile first within each
    slot, cut in one group per run of tiles along a row that share how their signal steps. With
    ``cycled``, a cycle of owners (taken from the own tile on, it wraps: Step.rotate), the whole
    cycles that follow on in a row one group, the owners cycling (Step.period), each cycle wrapped
    (a lone cycle stays a plain group but in a local build, ``local_fold``, as before the rows
    joined); else runs cut at each ``period`` (0: none). As (first tile, members, rotate, cycles)."""
    tiles = tile_grid(m, n, tile_m, tile_n)
    slots = -(-len(tiles) // g)
    in_order = (np.array(order, np.int64)[:, None] * ct + np.arange(ct)).ravel()
    in_order = (in_order[in_order < slots][:, None] * g + (local + np.arange(g)) % g).ravel()
    in_order = in_order[in_order < len(tiles)]
    if cycled:
        return [(tiles[a], k, r, cycles if cycles > 1 or local_fold else 0) for a, k, r, cycles in
                cycled_order_runs(m, n, tile_m, tile_n, in_order, g, rel)]
    return [(tiles[a], k, 0, 0) for a, k in grid_order_runs(m, n, tile_m, tile_n, in_order, period)]


def dealt_order_runs_of(m: int, n: int, tile_m: int, tile_n: int, g: int, ct: int, order: list[int],
                        locals_: range, rel: np.ndarray, cycled: bool, period: int,
                        local_fold: bool) -> dict[int, list[tuple[Tile, int, int, int]]]:
    """:func:`dealt_order_runs` of each owner in ``locals_`` (``rel``: GEMM+AR's, a slot's indices
    one apart). Where every slot is G tiles of one tile row and one width, a cycled owner l's
    cycles are owner 0's taken from tile l on, so its groups are owner 0's moved l tiles on and
    wrapped there (rotate l): moved so, not cut again from arrays. Why: a 2 x 8 GEMM+AR 32768^2
    build cut its 8 owners' 32k-tile orders, each about a millisecond."""
    alike = cycled and g > 1 and n % tile_n == 0 and -(-n // tile_n) % g == 0
    first = dealt_order_runs(m, n, tile_m, tile_n, g, ct, order, locals_[0] if not alike else 0, rel, cycled,
                             period, local_fold)
    if not alike:
        return {local: first if local == locals_[0] else dealt_order_runs(
            m, n, tile_m, tile_n, g, ct, order, local, rel, cycled, period, local_fold) for local in locals_}
    tiles = tile_grid(m, n, tile_m, tile_n)
    return {local: [(tiles[t.index + local], k, local, cycles) for t, k, _, cycles in first] if local else first
            for local in locals_}


def row_step(t: Tile) -> Step:
    """The step of a run of GEMM tiles along a row starting at ``t``: A (the row's operand rows) stays,
    B and the output move one tile width; the label counts tile indices."""
    return Step(((0, 0, 0), (0, 0, t.cols), (0, 0, t.cols)), label=(t.index, 1))
