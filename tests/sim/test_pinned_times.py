"""The reference grid's cheap points simulate to the times pinned in tests/sim/data/pinned_times.json
(tests/harness/pinned_times.py says why and how the table is rewritten after a deliberate model change)."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("simpy", reason="the simulator needs simpy (pip install 'mkernel[sim]')")

from harness.pinned_times import TABLE, simulate  # noqa: E402

ROWS = json.loads(TABLE.read_text())["rows"]
REL = 1e-9  # the same code on another CPU may sum in another order (numpy's SIMD widths), never further


def test_the_table_pins_every_kind_of_point():
    kernels = {r["def"]["kernel"] for r in ROWS}
    testbeds = {r["def"]["testbed"] for r in ROWS}
    assert len(ROWS) >= 30 and testbeds == {"paper-ib-2x8", "paper-efa-2x8"}, (len(ROWS), testbeds)
    assert kernels == {"ag_gemm", "gemm_rs", "gemm_ar", "ring_attention", "moe_dispatch_gemm"}, kernels


@pytest.mark.parametrize("row", ROWS, ids=[r["key"] for r in ROWS])
def test_a_pinned_point_simulates_to_its_pinned_times(row):
    fused, baseline = simulate(row["def"])
    assert fused == pytest.approx(row["fused_us"], rel=REL, abs=0), ("fused", fused, row["fused_us"])
    assert baseline == pytest.approx(row["baseline_us"], rel=REL, abs=0), ("baseline", baseline, row["baseline_us"])
