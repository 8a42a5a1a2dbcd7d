"""_tiling.tile_grid (each row's and column's bounds worked out once) against the grid made tile by tile."""
from __future__ import annotations

import pytest

from mkernel.builders._tiling import Tile, tile_grid


def _reference(m: int, n: int, tile_m: int, tile_n: int) -> tuple[Tile, ...]:
    """Row-major tiles, each tile's bounds clipped to the matrix (the grid as it was made before)."""
    tiles = []
    for r0 in range(0, m, tile_m):
        for c0 in range(0, n, tile_n):
            r1, c1 = min(m, r0 + tile_m), min(n, c0 + tile_n)
            tiles.append(Tile(len(tiles), r0, r1, c0, c1, r1 - r0, c1 - c0))
    return tuple(tiles)


@pytest.mark.parametrize("shape", [(512, 1024, 128, 256), (1000, 777, 128, 256), (5, 3, 7, 2), (128, 256, 128, 256),
                                   (1, 1, 1, 1), (0, 5, 2, 2), (5, 0, 2, 2), (300, 100, 64, 300)])
def test_tile_grid_is_the_grid_made_tile_by_tile(shape):
    got, want = tile_grid(*shape), _reference(*shape)
    assert got == want and all(type(t) is Tile for t in got)
    assert [t.index for t in got] == list(range(len(got)))  # (a tile's index is its place in the grid)
