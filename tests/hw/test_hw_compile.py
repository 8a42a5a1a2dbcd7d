"""CI compile check: every device kernel builds for sm_90a with nvcc (no GPU needed), and the native
proxy builds with the C compiler (with CUDA headers when present, so the loopback transport is in)."""
from __future__ import annotations

import shutil

import pytest

from mkernel.hw.measure import nvcc
from mkernel.hw.runtime import native


@pytest.mark.skipif(shutil.which("nvcc") is None and not (nvcc.Path("/usr/local/cuda/bin/nvcc").exists()),
                    reason="nvcc is not installed on this machine")
@pytest.mark.parametrize("src", nvcc.sources(), ids=lambda p: p.name)
def test_device_source_compiles_for_sm90a(src, tmp_path):
    cubin = nvcc.build(src.stem, cache_dir=tmp_path)
    assert cubin.stat().st_size > 1000


def test_native_proxy_builds(tmp_path):
    lib = native.build(cache_dir=tmp_path)
    assert lib.stat().st_size > 1000


def test_loopback_transport_is_compiled_in_where_cuda_headers_exist(tmp_path):
    if native.cuda_include_dir() is None:
        pytest.skip("no cuda.h on this machine; the loopback transport is compiled out")
    assert b"cuStreamBatchMemOp_v2" in native.build(cache_dir=tmp_path).read_bytes()
