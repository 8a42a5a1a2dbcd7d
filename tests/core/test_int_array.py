"""The region, signal and task fields validate() reads are packed by :func:`mkernel.members.int_array`
(struct, where every value is an int that fits) and fall back to ``np.fromiter`` (where struct
refuses): both paths must give fromiter's array, or raise fromiter's error, and the region table
must equal one read field by field with ``attrgetter`` and ``fromiter`` (the reading it replaced),
on the fast path and on both of its fallbacks (a name not among the buffers; numbers past 32 bits),
read in one chunk or in many.
"""
from __future__ import annotations

import dataclasses
from itertools import chain
from operator import attrgetter

import numpy as np

import pytest

from mkernel import Cluster, Workload
from mkernel.builders import get
from mkernel.ir import Region
from mkernel import members
from mkernel.members import Codes, int_array, read_regions


def _fromiter(values: list, dtype: type):
    """fromiter's array of ``values``, or the type and text of what it raised."""
    try:
        return np.fromiter(values, dtype, len(values))
    except Exception as e:  # noqa: BLE001 (the error itself is what is compared)
        return type(e), str(e)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("values", [
    [], [0, 1, -1, 7, True, False, np.int64(5), np.int32(-3)],  # packed (struct)
    [2 ** 31 - 1, -2 ** 31], [2 ** 31], [-2 ** 31 - 1], [2 ** 63 - 1, -2 ** 63], [2 ** 63],  # past 32 or 64 bits
    [1, 2.5], [1.0], ["7"], ["x"], [None],  # no integer: fromiter's conversion, or its error
])
def test_int_array_is_fromiter(values, dtype):
    want = _fromiter(values, dtype)
    try:
        got = int_array(values, dtype)
    except Exception as e:  # noqa: BLE001
        got = type(e), str(e)
    if isinstance(want, tuple):
        assert got == want
    else:
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype and np.array_equal(got, want)


def _old_records(s) -> np.ndarray:
    """Each region's buffer code and bounds as the table read them before int_array (attrgetter,
    fromiter; 64-bit): the oracle."""
    codes = Codes((b.name, i) for i, b in enumerate(s.buffers))
    regions = list(chain.from_iterable(t.reads + t.writes for t in s.tasks))
    n = len(regions)
    out = np.zeros((n, 6), np.int64)
    out[:, 0] = np.fromiter(map(codes.__getitem__, map(attrgetter("buffer"), regions)), np.int64, n)
    out[:, 1:] = np.fromiter(chain.from_iterable(map(attrgetter("rank", "row0", "row1", "col0", "col1"), regions)),
                             np.int64, 5 * n).reshape(-1, 5)
    return out, dict(codes)


def _plant(s, regions: list[Region]):
    """``s`` with the first read of its first tasks that read replaced by ``regions``, one each."""
    tasks, todo = list(s.tasks), list(regions)
    for i, t in enumerate(tasks):
        if todo and t.reads:
            tasks[i] = dataclasses.replace(t, reads=(todo.pop(0),) + t.reads[1:])
    assert not todo
    return dataclasses.replace(s, tasks=tuple(tasks))


S = get("gemm_ar").build(Workload(m=512, n=1024, k=64, chunk_tiles=2), Cluster("t", 2, 2, transport="ib_rc"),
                         grouped=True)


@pytest.mark.parametrize("case, planted", [
    ("as built", []),
    ("names not among the buffers", [Region("ZZ", 0, 0, 1, 0, 1), Region("YY", 1, 0, 1, 0, 1),
                                     Region("ZZ", 0, 2, 3, 0, 1)]),
    ("a bound past 32 bits", [Region("A", 0, 0, 2 ** 33, 0, 1)]),
    ("both", [Region("QQ", 0, 0, 1, 0, 1), Region("A", 0, -2 ** 40, 1, 0, 1)]),
])
@pytest.mark.parametrize("chunk", [8192, 3])  # (3: every chunk boundary, names first met in later chunks)
def test_region_table_reads_as_before(case, planted, chunk, monkeypatch):
    monkeypatch.setattr(members, "_CHUNK", chunk)
    s = _plant(S, planted)
    recs, _, codes = read_regions(s)
    want, want_codes = _old_records(s)
    assert recs.dtype == (np.int64 if case in ("a bound past 32 bits", "both") else np.int32)
    assert np.array_equal(recs[:, :6], want) and codes == want_codes
