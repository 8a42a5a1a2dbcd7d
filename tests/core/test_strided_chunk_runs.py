"""_tiling.strided_chunk_runs (GEMM+AR's owned chunks cut on arrays) against its definition, the runs
of each chunk of the owner's tiles cut one by one, on even and ragged grids."""
from __future__ import annotations

import itertools

import pytest

from mkernel.builders._tiling import batches, runs, strided_chunk_runs, tile_grid


@pytest.mark.parametrize("m,n,tile_m,tile_n", [(1024, 1024, 128, 256), (1000, 1100, 128, 256), (300, 64, 128, 256),
                                               (130, 4096, 128, 256), (64, 3000, 64, 128)])
def test_it_cuts_what_runs_cuts_chunk_by_chunk(m, n, tile_m, tile_n):
    tiles = tile_grid(m, n, tile_m, tile_n)
    for stride, size in itertools.product((1, 2, 3, 8), (1, 2, 4, 5)):
        for first in range(min(len(tiles), 2 * stride + 1)):
            want = [runs(chunk, stride=stride) for chunk in batches(list(tiles[first::stride]), size)]
            assert strided_chunk_runs(m, n, tile_m, tile_n, first, stride, size) == want, (stride, size, first)
    assert strided_chunk_runs(m, n, tile_m, tile_n, len(tiles), 2, 4) == []
