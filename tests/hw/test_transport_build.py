"""Every transport compiles with warnings as errors: with rdma-core's and libfabric's headers where
they are installed (.ci/run installs Debian 12's: rdma-core 44, libfabric 1.17), and without them
(each network transport then builds as a stub that says what is missing). Nothing links but libdl:
the libraries are opened with dlopen when a transport is chosen."""
from __future__ import annotations

import subprocess

import pytest

from mkernel.hw.runtime import native


def _build(tmp_path, defines: list[str], name: str):
    out = tmp_path / f"{name}.so"
    cmd = native.compile_command(native.compiler(), out, [native.CSRC / s for s in native.SOURCES], defines,
                                 native.cuda_include_dir())
    assert "-Werror" in cmd and "-Wall" in cmd
    res = subprocess.run(cmd + ["-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    undefined = subprocess.run(["nm", "-u", "-D", str(out)], capture_output=True, text=True).stdout
    assert not [s for s in undefined.split() if s.startswith(("ibv_", "efadv_", "fi_", "cu"))], undefined
    return out


def test_every_transport_compiles_with_its_headers(tmp_path):
    found = native.optional_defines()
    missing = sorted(set(native.OPTIONAL) - set(found))
    if missing:
        pytest.skip(f"headers for {', '.join(missing)} are not installed (libibverbs-dev, libfabric-dev: .ci/run "
                    f"installs them)")
    _build(tmp_path, found, "full")
    assert {"verbs", "ofi"} <= native.features()  # the library the tests load has them too


def test_every_transport_compiles_without_them_as_a_stub_naming_what_is_missing(tmp_path):
    import ctypes

    from mkernel.hw.lowering import ring

    lib = ctypes.CDLL(str(_build(tmp_path, [], "stubs")))
    lib.mk_net_create.restype = ctypes.c_void_p
    lib.mk_net_create.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    lib.mk_build_features.restype = ctypes.c_int
    assert lib.mk_build_features() & 3 == 0
    buf = (ctypes.c_uint64 * 64)()
    opts = ring.NetOptions(rank=0, nranks=2, n_flags=4, mem_base=ctypes.addressof(buf), mem_bytes=512,
                           flag_base=ctypes.addressof(buf), peers=(ctypes.c_uint8 * 2)(0, 1))
    for name, header in (("verbs_rc", "infiniband/verbs.h"), ("verbs_srd", "infiniband/verbs.h"),
                         ("ofi", "rdma/fabric.h")):
        err = ctypes.create_string_buffer(256)
        assert not lib.mk_net_create(name.encode(), ctypes.byref(opts), None, err, 256)
        assert f"{name} was built without {header}" in err.value.decode()
