"""The region table validate() reads is handed to the simulator's hazard grids (issue 30's every-node
row: the grids read it instead of reading the schedule's 490k regions again).

The oracle is :func:`mkernel.members.read_regions` of the schedule a run executes: the table that
validate() returns must equal it array for array, the runner must hand each run the table of the
schedule it runs (fused and baseline are not swapped), a table of another schedule is refused, and
a run that executes another schedule (a data or stressed run expands it) must read that one's own
regions, whatever table it is handed.
"""
from __future__ import annotations

import dataclasses

import numpy as np

import pytest

from mkernel import Cluster, Workload, runner
from mkernel.errors import InputError
from mkernel.builders import get
from mkernel.members import read_regions
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend
from mkernel.sim.cellgrid import Cells
from mkernel.sim.engine import Model

W = Workload(m=512, n=1024, k=64, chunk_tiles=2, baseline_chunk_kib=64)
C = Cluster("t", 2, 2, transport="ib_rc")


def _equal(a: tuple, b: tuple) -> bool:
    (ra, fa, ca), (rb, fb, cb) = a, b
    return (ca == cb and fa.keys() == fb.keys() and np.array_equal(ra, rb)
            and all(np.array_equal(fa[k], fb[k]) for k in fa))


def _builds():
    for kernel in ("gemm_ar", "ring_attention", "moe_dispatch_gemm"):
        w = W if kernel == "gemm_ar" else Workload(kernel=kernel, m=256, n=64, k=32, tile_m=64, experts=4, topk=2)
        m = get(kernel)
        yield m.build(w, C, grouped=True)
        yield m.build_baseline(w, C, grouped=True)


@pytest.mark.parametrize("s", list(_builds()), ids=lambda s: f"{s.kernel}/{s.variant}")
def test_validate_returns_the_schedules_region_table(s):
    table = s.validate(races=False)
    assert table is not None and _equal(table, read_regions(s))


def test_the_runner_hands_each_run_its_own_schedules_table(monkeypatch):
    handed = []
    run = SimBackend.run

    def spy(self, schedule, cluster, **kw):
        handed.append((schedule, kw.get("regions")))
        return run(self, schedule, cluster, **kw)

    monkeypatch.setattr(SimBackend, "run", spy)
    sc = load_scenario("scenarios/paper-ib-2x8.toml")
    sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel="gemm_ar", m=2048, n=2048, k=256),
                             cluster=dataclasses.replace(sc.cluster, nodes=2, gpus_per_node=2))
    result, stats = runner.run(sc, collapse=False)
    assert result["events"] and not stats.hazards
    assert [s.variant for s, _ in handed] == ["fused", result["baseline"]["name"]] != ["fused", "fused"]
    assert all(table is not None and _equal(table, read_regions(s)) for s, table in handed)


def test_a_run_of_another_schedule_reads_its_own_regions():
    """A stressed run expands the schedule, so the table handed (of the grouped build) is not its
    schedule's: the tracker must read the expanded one's (a wrong table would misplace every cell)."""
    s = get("gemm_ar").build(W, C, grouped=True)
    table = s.validate()
    model = Model(s, C, None, stress=2.0, seed=3, regions=table)
    assert model.s is not s and len(model.s.tasks) > len(s.tasks)
    own = Cells(model.s)
    assert np.array_equal(model.tracker.cells.read.cell, own.read.cell) and model.tracker.cells.total == own.total
    model.run()
    assert not model.tracker.hazards


def test_a_table_of_another_schedule_is_refused_before_the_run():
    fused, baseline = get("gemm_ar").build(W, C, grouped=True), get("gemm_ar").build_baseline(W, C, grouped=True)
    with pytest.raises(InputError, match="regions: the table handed to the run of gemm_ar/"):
        SimBackend().run(fused, C, regions=baseline.validate())
    assert SimBackend().run(fused, C, regions=fused.validate()).time_s > 0


def test_regions_past_2_31_are_read_in_64_bits_exactly():
    """Records are 32-bit where every number fits; one bound past 2^31 must switch the whole table to
    64 bits with every value exact (numpy before 2 wrapped silently instead of raising: numpy >= 2)."""
    s = get("gemm_ar").build(W, C)
    recs, _, _ = read_regions(s)
    assert recs.dtype == np.int32
    t = next(i for i, x in enumerate(s.tasks) if x.reads)
    r = s.tasks[t].reads[0]
    far = dataclasses.replace(r, row0=r.row0 + 2**31, row1=r.row1 + 2**31, col1=r.col1 + 2**32)
    task = dataclasses.replace(s.tasks[t], reads=(far,) + s.tasks[t].reads[1:])
    wide, _, _ = read_regions(dataclasses.replace(s, tasks=s.tasks[:t] + (task,) + s.tasks[t + 1:]))
    assert wide.dtype == np.int64
    row = sum(len(x.reads) + len(x.writes) for x in s.tasks[:t])  # the far region's record
    expected = recs.astype(np.int64)
    expected[row, 2:4] += 2**31
    expected[row, 5] += 2**32
    assert np.array_equal(wide, expected)
