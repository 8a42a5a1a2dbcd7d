"""_tiling.grid_runs (a grid's row runs cut as slices, told from its shape) against runs() walking the grid."""
from __future__ import annotations

import pytest

from mkernel.builders._tiling import grid_runs, runs, tile_grid


@pytest.mark.parametrize("shape", [(8, 8, 4, 4), (9, 8, 4, 4), (8, 9, 4, 4), (9, 11, 4, 4), (3, 3, 4, 4),
                                   (5, 13, 2, 13), (5, 14, 2, 13), (1, 40, 1, 8), (40, 1, 8, 1), (7, 7, 1, 1),
                                   (8, 0, 4, 4), (0, 8, 4, 4)])
def test_grid_runs_are_the_runs_of_the_grid(shape):
    want = tuple(tuple(run) for run in runs(tile_grid(*shape)))
    got = grid_runs.__wrapped__(*shape)  # (not the cached one)
    assert got == want
    assert [type(run) for run in got] == [tuple] * len(want)
