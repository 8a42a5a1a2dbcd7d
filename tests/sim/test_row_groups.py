"""GEMM+AR's tile rows as one group on every local rank (rotation inside a period, issue 30): a full
build joins a rank's owner cycles along a row, each taken from its own tile on, into one group whose
owners cycle (``Step.period``) and wrap within each cycle (``Step.rotate``).

The oracle is the same build with its rows cut into plain slot runs (``cycled_order_runs`` replaced
by the owner cycles of ``grid_order_runs``: no group wraps or cycles, so no member goes through the
new offsets), for every golden GEMM+AR case and variant with G > 1 on a shape with whole rows of
slots, in every form a run asks for (whole, first nodes, local rank 0); the expanded builds must be
equal task for task, validate must take the rows, every local rank must have groups larger than G,
and on 2 x 4 and 3 x 2 the simulated times (collapsed and tracked) and the hw lowering's tables
must be the plain build's. tests/core/test_frozen_builds.py checks the expansions against main
b35c019's builds on more shapes.
"""
from __future__ import annotations

import dataclasses

import pytest

from harness import golden_schedules as golden
from mkernel import builders
from mkernel.builders import _tiling, gemm_ar
from mkernel.builders._tiling import grid_order_runs
from mkernel.ir import Op, expand

SHAPE = dict(m=1000, n=4096, k=64, chunk_tiles=2)  # 16 tile columns (the last row ragged): 4 slots of 4 a row
CASES = [(name, dataclasses.replace(w, **SHAPE), c, first) for name, w, c, first in golden.cases()
         if name.startswith("gemm_ar/") and c.gpus_per_node > 1]
SMALL = [case for case in CASES if "/2x4/" in case[0] or "/3x2/" in case[0]]


def _plain(m, n, tile_m, tile_n, order, period, rel):
    return [(a, k, 0, 0) for a, k in grid_order_runs(m, n, tile_m, tile_n, order, period)]


def _forms(w, c, first):
    """(keyword arguments) of every form of the fused build a run asks for on the case."""
    if not first:
        return [{}]
    return [dict(first_nodes=first)] + ([dict(first_nodes=first, local_fold=True)]
                                        if builders.local_symmetric(w, c) else [])


def _largest(s, local: int) -> int:
    return max(t.count for t in s.tasks if t.op is Op.GEMM and t.rank % s.gpus_per_node == local)


@pytest.mark.parametrize("name,w,c,first", CASES, ids=[case[0] for case in CASES])
def test_rows_stand_for_the_plain_builds_tasks(name, w, c, first, monkeypatch):
    rows = [gemm_ar.build(w, c, grouped=True, **kw) for kw in _forms(w, c, first)]
    monkeypatch.setattr(_tiling, "cycled_order_runs", _plain)
    plain = [gemm_ar.build(w, c, grouped=True, **kw) for kw in _forms(w, c, first)]
    for r, p in zip(rows, plain):
        assert expand(r).tasks == expand(p).tasks
        r.validate()
    g = c.gpus_per_node
    assert max(_largest(plain[0], local) for local in range(g)) <= g  # (the plain build: one cycle a group)
    assert len(rows[0].tasks) < len(plain[0].tasks)
    # every built local rank takes whole rows where its chunks go in order (direct: 16 tiles a row)
    for r in rows:
        for local in range(1) if r.local_fold else range(g):
            assert _largest(r, local) == 16 if "internode=direct" in name or c.nodes == 1 else _largest(r, local) > g
    assert any(t.step.rotate and t.step.period for t in rows[0].tasks if t.count > 1)  # (local ranks > 0)
    assert not any(t.step.rotate for r in rows[1:] for t in r.tasks if t.count > 1)  # (local rank 0 alone)


@pytest.mark.parametrize("name,w,c,first", SMALL, ids=[case[0] for case in SMALL])
def test_rows_simulate_and_lower_as_the_plain_build(name, w, c, first, monkeypatch):
    from mkernel.sim import SimBackend

    kw = {"first_nodes": first} if first else {}
    rows = gemm_ar.build(w, c, grouped=True, **kw)
    monkeypatch.setattr(_tiling, "cycled_order_runs", _plain)
    plain = gemm_ar.build(w, c, grouped=True, **kw)
    for collapse in (True, False) if not first else (True,):
        a, b = SimBackend().run(plain, c, collapse=collapse), SimBackend().run(rows, c, collapse=collapse)
        assert (b.time_s, b.per_rank_s, b.hazards) == (a.time_s, a.per_rank_s, a.hazards), collapse
    if first:
        return
    golden.assert_lowered_alike(plain, rows)
