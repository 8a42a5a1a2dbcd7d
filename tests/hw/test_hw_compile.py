"""CI compile checks, no GPU needed: the self-test kernels (Triton, on the fused kernel's own protocol
code) build for sm_90a through ptxas, and the native proxy builds with the C compiler (with CUDA
headers when present, so the loopback transport is in). The fused kernel's own compile checks are in
test_hw_fused.py, the bulk paths' in test_hw_bulk*.py."""
from __future__ import annotations

import pytest

from mkernel.hw.runtime import native


def _compile(name: str):
    triton = pytest.importorskip("triton", reason="triton is not installed (pip install 'mkernel[test]')")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from mkernel.hw.measure import ring_kernels, selftest

    fn, sig, const = ring_kernels.SIGNATURES[name]
    return triton.compile(ASTSource(fn=fn, signature=sig, constexprs=const), target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": selftest.NUM_WARPS})


@pytest.mark.parametrize("name", ["epochs", "timeout", "roundtrip", "stream", "exchange"])
def test_selftest_kernel_compiles_for_sm90a_with_the_protocol_in_it(name):
    k = _compile(name)
    ptx = k.asm["ptx"]
    assert len(k.asm["cubin"]) > 1000  # ptxas ran
    assert ".target sm_90a" in ptx
    assert "ld.acquire.sys.global.u64" in ptx and "%globaltimer" in ptx  # sync._wait: bounded acquire polls
    assert ("st.release.sys.global.u32" in ptx) == (name in ("roundtrip", "stream", "exchange"))  # sync._push's commit


def test_native_proxy_builds(tmp_path):
    lib = native.build(cache_dir=tmp_path)
    assert lib.stat().st_size > 1000


def test_loopback_transport_is_compiled_in_where_cuda_headers_exist(tmp_path):
    if native.cuda_include_dir() is None:
        pytest.skip("no cuda.h on this machine; the loopback transport is compiled out")
    assert b"cuStreamBatchMemOp_v2" in native.build(cache_dir=tmp_path).read_bytes()
