"""The standalone GEMM (hw/kernels/gemm.py, the benchmarks' yardstick): compile check for sm_90a (CI, no GPU) and
correctness on a GPU."""
from __future__ import annotations

import pytest

from mkernel.reference import BF16_RTOL

triton = pytest.importorskip("triton", reason="triton is not installed (pip install 'mkernel[test]' pins 3.6.0)")


@pytest.mark.parametrize("flatten", [False, True], ids=["loop", "flattened"])
@pytest.mark.parametrize("config", [0, 1], ids=["128x256", "128x128"])
@pytest.mark.parametrize("wait", [False, True], ids=["plain", "flag-waits"])
def test_gemm_compiles_for_sm90_with_wgmma_and_tma(wait, config, flatten):
    from dataclasses import replace

    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from mkernel.hw.kernels import gemm

    c = replace(gemm.CONFIGS[config], flatten=flatten)
    sig, const = gemm.signature(c, wait)
    k = triton.compile(ASTSource(fn=gemm.gemm_kernel, signature=sig, constexprs=const),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": c.num_warps,
                                                                  "num_stages": c.num_stages})
    ptx = k.asm["ptx"]
    assert ".target sm_90a" in ptx
    assert "wgmma.mma_async" in ptx and "cp.async.bulk.tensor" in ptx
    assert ("ld.acquire.sys" in ptx) == wait and "ld.acquire.gpu" not in ptx  # the fused kernel's wait (sync._wait)
    assert len(k.asm["cubin"]) > 10_000


def test_config_choice_avoids_idle_sms_and_flattens_short_k():
    from mkernel.hw.kernels import gemm

    assert gemm.choose(8192, 8192, 8192, 132) == gemm.CONFIGS[0]  # 2048 tiles: big tiles, long K
    assert gemm.choose(4096, 2304, 4096, 132).BN == 128  # 288 big tiles fill 3 waves to 73%; small ones 87%
    assert gemm.choose(8192, 8192, 512, 132).flatten  # 8 k-tiles


SHAPES = [(256, 256, 256), (1001, 264, 520), (8191, 1000, 776), (128, 8, 8), (300, 4096, 2048)]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gemm_matches_fp32_reference(shape):
    import torch

    from mkernel.hw.kernels import gemm

    M, N, K = shape
    g = torch.Generator(device="cuda").manual_seed(M * 7 + N)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16, generator=g)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)  # poisoned
    gemm.gemm(a, b, out)
    ref = a.float() @ b.float()
    assert not out.isnan().any()
    assert ((out.float() - ref).norm() / ref.norm()).item() <= BF16_RTOL


@pytest.mark.gpu
def test_gemm_waits_on_flags_and_a_missing_flag_names_itself():
    import torch

    from mkernel.hw.kernels import gemm
    from mkernel.hw.runtime.state import ErrorBlock

    M, N, K = 512, 512, 256
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    flags = torch.tensor([3, 2, 3, 3], dtype=torch.int64, device="cuda")  # row block 1 is one epoch behind
    err = ErrorBlock(torch.device("cuda"))
    out = gemm.gemm(a, b, flags=flags, epoch=3, errors=err, rank=5, timeout_s=0.01)
    failure = err.read()
    assert (failure.code, failure.rank, failure.role, failure.what, failure.index, failure.epoch,
            failure.observed) == (8, 5, "compute", "flag", 1, 3, 2)
    assert ((out.float() - a.float() @ b.float()).norm() / (a.float() @ b.float()).norm()).item() <= BF16_RTOL
    flags[1] = 3
    err.clear()
    gemm.gemm(a, b, out, flags=flags, epoch=3, errors=err)
    assert err.read() is None


@pytest.mark.gpu
def test_gemm_refuses_unaligned_rows_before_launch():
    import torch

    from mkernel.hw.kernels import gemm

    a = torch.randn(64, 777, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(777, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"K \(777\) and N \(64\) multiples of 8"):
        gemm.gemm(a, b)
