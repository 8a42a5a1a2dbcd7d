"""The hazard grids' shortcuts of memory and passes (mkernel.sim.gridrows, gridedges) against their plain forms:
repeated reads compared two 32-bit fields at a time, and the stepped rows' keys made a chunk of rows at a time."""
from __future__ import annotations

import numpy as np

import pytest

from mkernel.sim.cellgrid import Cells

from test_cellgrid import _builds


def test_repeated_reads_compared_two_fields_at_a_time_are_those_compared_one_by_one():
    """gridrows.repeats (a C-ordered 32-bit table's fields compared two at a time, as 64-bit numbers)
    against comparing each record with the one before it field by field: 32- and 64-bit tables, odd and
    even widths, a column slice (not C-ordered), negative fields, records that differ in one field only
    (each field in turn) and entries that change between equal records. Planted error tried: the odd
    last field left out of the pairs (a record differing only there read as a repeat)."""
    from mkernel.sim.gridrows import repeats

    rng = np.random.default_rng(9)
    for trial in range(120):
        width, size = int(rng.integers(1, 12)), int(rng.integers(0, 30))
        recs = rng.integers(-3, 3, (size, width))
        for j in range(1, size):  # (most records repeat the one before, some in all fields but one)
            if rng.random() < 0.6:
                recs[j] = recs[j - 1]
                if rng.random() < 0.4:
                    recs[j, int(rng.integers(0, width))] += 1
        recs = recs.astype((np.int32, np.int64)[trial % 3 == 2])
        if trial % 5 == 4 and width > 1:
            recs = recs[:, 1:]  # (a view: not C-ordered)
        entry = np.sort(rng.integers(0, 4, size))
        want = [j > 0 and entry[j] == entry[j - 1] and recs[j].tolist() == recs[j - 1].tolist() for j in range(size)]
        got = repeats(recs, entry)
        assert (got is None and not any(want)) or (got is not None and got.tolist() == want), (recs, entry)


@pytest.mark.parametrize("s", list(_builds()))
def test_cells_made_a_few_rows_at_a_time_are_those_made_at_once(s, monkeypatch):
    """Stepped.keys moves its rows' keys a chunk of rows at a time (gridedges.CHUNK): with chunks of 3 rows
    (several, the last one short) every grid, edge and cell is as with the rows in one chunk. Planted error
    tried: each chunk's last row left unmoved."""
    from mkernel.sim import gridedges

    whole = Cells(s)
    monkeypatch.setattr(gridedges, "CHUNK", 3)
    few = Cells(s)
    assert whole.grid == few.grid and whole.total == few.total
    for a, b in ((whole.rows.u, few.rows.u), (whole.cols.u, few.cols.u), (whole.write.cell, few.write.cell),
                 (whole.distinct.cell, few.distinct.cell), (whole.write.start, few.write.start),
                 (whole.distinct_need, few.distinct_need)):
        assert np.array_equal(a, b)


def test_row_starts_are_32_bit_only_where_their_total_fits():
    """A side's row starts are a running sum of its rows' cells: 32-bit only while the total (not the
    grid's cell count: rows overlap) stays below 2^31 (planted: typed by the largest row, caught)."""
    from mkernel.sim.cellgrid import _index_type

    assert _index_type(np.array([5, 7, 0], np.int32)) is np.int32
    assert _index_type(np.zeros(0, np.int32)) is np.int32
    assert _index_type(np.array([2 ** 30, 2 ** 30 - 1], np.int32)) is np.int32  # 2^31 - 1: the last that fits
    assert _index_type(np.array([2 ** 30, 2 ** 30], np.int32)) is np.int64  # (an int32 sum would wrap to < 0)
    assert _index_type(np.array([2 ** 31 - 1, 1], np.int64)) is np.int64
