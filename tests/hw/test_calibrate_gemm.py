"""`mkernel calibrate` times the GEMM the fused kernel runs (issue 32): the fused kernel itself, as
``gemm_ar`` at world 1, on the SM counts and workload tiles of ``gemm_sms``. On the CPU: which device
path each calibrated tile takes (the plan decides it, as for every fused GEMM op). On a GPU (marked):
the sections run, check their output and produce the raw schema the profile fit reads."""
from __future__ import annotations

import pytest

from mkernel import builders
from mkernel.cluster import Cluster
from mkernel.ir import Op, Role
from mkernel.problems import Workload


def _plan(tile: tuple[int, int], sms: int):
    from mkernel.hw.lowering import plan

    m, n, k = 4096, 4096, 4096
    w = Workload(kernel="gemm_ar", m=m, n=n, k=k, tile_m=tile[0], tile_n=tile[1])
    s = builders.get("gemm_ar").build(w, Cluster("torch", 1, 1).with_sms(sms))
    return s, plan.build(s, 0)[0]


@pytest.mark.parametrize("sms", [8, 132])
def test_calibrated_tiles_take_the_fused_kernels_table_and_task_paths(sms):
    """128 x 256 workload tiles fill the kernel's tile: every one runs in the GEMM table's loop
    (tiles._gemm_rows); 128 x 128 ones do not: every one runs on the task path (tiles._mma). At world 1
    the whole budget computes, so the SM count calibrate asks for is the compute role's."""
    from mkernel.hw.lowering.plan import GEMM_TILE
    from mkernel.hw.measure.calibrate import GEMM_TILES

    assert GEMM_TILES[0] == GEMM_TILE[:2] and GEMM_TILES[1] != GEMM_TILE[:2]
    for tile, in_table in ((GEMM_TILES[0], True), (GEMM_TILES[1], False)):
        s, p = _plan(tile, sms)
        gemms = sum(t.op is Op.GEMM for t in s.tasks)
        assert s.launches[0].budget(Role.COMPUTE) == sms and p.grid == sms
        assert len(p.gemm_tiles) == (gemms if in_table else 0), tile


@pytest.mark.gpu
def test_calibrate_times_the_fused_kernels_gemm_and_fits_a_profile():
    import torch.distributed as dist

    from mkernel.hw import unavailable

    if unavailable():
        pytest.skip(unavailable())
    from mkernel.hw import api
    from mkernel.hw.measure import calibrate
    from mkernel.reference import BF16_RTOL
    from mkernel.hw.runtime.safety import apply_rendezvous
    from mkernel.studies import profile

    apply_rendezvous("calibrate")
    if not dist.is_initialized():
        dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        mm = calibrate.matmul()
        rows = calibrate.gemm_sms()
    finally:
        api.close()
    assert mm["kernel"] == "fused" and mm["ours_rel_err"] <= BF16_RTOL
    assert 0.5 < mm["ours_tflops"] / mm["cublas_tflops"] < 1.3, mm
    assert {(r["bn"], r["sms"]) for r in rows} == {(bn, s) for _, bn in calibrate.GEMM_TILES for s in calibrate.GEMM_SMS}
    assert all(r["kernel"] == "fused" and r["us"] > 0 for r in rows)
    ratio = profile.tile_rate_ratio(rows)
    assert ratio is not None and 0.1 < ratio <= 1.05, ratio  # 128 x 128 tiles run no faster per SM than full ones
