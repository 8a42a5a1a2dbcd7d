"""The device protocol is specified once, in ``hw/runtime/csrc/mk_ring.h``; its other copies must agree
with it. The compiled C lists every constant of the header (``mk_constant_name``, ``mk_constant`` in
host_ring.c), and each mirror is checked against those values: the Python one (:mod:`ring`,
:mod:`layout`, the error block's role and "what" names) on every CPU, and the Triton one (the fused
kernel's constexprs in :mod:`sync` and :mod:`bulk`) where Triton is installed. There is one device
copy: the self-test kernels (:mod:`mkernel.hw.measure.ring_kernels`) run the fused kernel's own."""
from __future__ import annotations

import ctypes

import pytest

from mkernel.hw.lowering import layout, ring
from mkernel.hw.lowering.layout import ErrorField
from mkernel.hw.runtime import native, state
from mkernel.ir import COMMAND_BYTES, Role

ERROR_FIELDS = {"code": ErrorField.CODE, "rank": ErrorField.RANK, "role": ErrorField.ROLE, "what": ErrorField.WHAT,
                "index": ErrorField.INDEX, "epoch": ErrorField.EPOCH, "observed": ErrorField.SEEN,
                "expected": ErrorField.EXPECTED, "task": ErrorField.TASK}
ERROR_NAMES = {"MK_OK": 0, "MK_ERR_TYPE": 1, "MK_ERR_DST_RANK": 2, "MK_ERR_BYTES": 3, "MK_ERR_SRC_RANGE": 4,
               "MK_ERR_DST_RANGE": 5, "MK_ERR_CHUNK": 6, "MK_ERR_TRANSPORT": 7, "MK_ERR_TIMEOUT": ring.ERR_TIMEOUT,
               "MK_ERR_ABORTED": ring.ERR_ABORTED}


def c_constants() -> dict[str, int]:
    """Every constant of mk_ring.h, by name, as the C compiler laid it out."""
    lib, out, i = native.load(), {}, 0
    while (name := lib.mk_constant_name(i)) is not None:
        value = ctypes.c_uint64()
        assert lib.mk_constant(name, ctypes.byref(value)) == 0, name
        out[name.decode()] = value.value
        i += 1
    return out


def python_mirror() -> dict[str, int]:
    """What the Python side believes each of those constants is."""
    want = {f"mk_cmd.{name}": ring.CMD_DTYPE.fields[name][1] for name in ring.CMD_DTYPE.names}
    want |= {"sizeof(mk_cmd)": ring.CMD_DTYPE.itemsize, "MK_CMD_BYTES": COMMAND_BYTES,
             "mk_ring_ctl.tail": 8 * ring.CTL_TAIL, "mk_ring_ctl.abort": 8 * ring.CTL_ABORT,
             "sizeof(mk_ring_ctl)": 8 * ring.CTL_WORDS, "MK_ERROR_BYTES": layout.ERROR_BYTES,
             "MK_WAIT_CHECK_EVERY": ring.WAIT_CHECK_EVERY, "MK_WAIT_ABORT_EVERY": ring.WAIT_ABORT_EVERY,
             "MK_MAX_BATCH": ring.MAX_BATCH, "MK_CMD_PUT": ring.PUT, "MK_CMD_SIGNAL": ring.SIGNAL}
    want |= {f"mk_dev_err.{name}": int(field) for name, field in ERROR_FIELDS.items()}
    want |= ERROR_NAMES
    want |= {f"MK_ROLE_{role.name}": getattr(ring, f"ROLE_{role.name}") for role in Role}
    want |= {"MK_WHAT_FLAG": ring.WHAT_FLAG, "MK_WHAT_RING_SLOT": ring.WHAT_RING_SLOT,
             "MK_WHAT_BULK_STAGE": ring.WHAT_BULK_STAGE}
    return want


def test_the_python_mirror_matches_every_constant_of_the_header():
    have, want = c_constants(), python_mirror()
    assert set(have) == set(want), f"only in C: {set(have) - set(want)}; only in Python: {set(want) - set(have)}"
    assert {k: v for k, v in have.items() if want[k] != v} == {}


def test_error_codes_roles_and_whats_decode_by_the_headers_numbers():
    assert set(ring.ERRORS) == set(ERROR_NAMES.values()) and ring.ERRORS[ring.ERR_TIMEOUT] == "timeout"
    assert (layout.ErrorCode.TIMEOUT, layout.ErrorCode.ABORTED) == (ring.ERR_TIMEOUT, ring.ERR_ABORTED)
    have = c_constants()
    assert [state.ROLES[have[f"MK_ROLE_{r.name}"]] for r in Role] == [r.value for r in Role]
    assert (state.WHATS[have["MK_WHAT_FLAG"]], state.WHATS[have["MK_WHAT_RING_SLOT"]]) == ("flag", "ring slot")


def test_the_fused_kernels_triton_copy_takes_the_headers_constants():
    pytest.importorskip("triton", reason="triton is not installed (pip install 'mkernel[test]')")
    from mkernel.hw.kernels import bulk, sync

    have = c_constants()
    records = {"seq": sync.REC_SEQ, "type": sync.REC_TYPE, "chunk": sync.REC_CHUNK, "src_off": sync.REC_SRC,
               "dst_off": sync.REC_DST, "epoch": sync.REC_EPOCH, "timestamp": sync.REC_TIME}
    assert {f: int(v) for f, v in records.items()} == {f: have[f"mk_cmd.{f}"] for f in records}
    # _push writes (type, dst_rank) as one u32 and (chunk, bytes) as one u64
    assert have["mk_cmd.dst_rank"] == have["mk_cmd.type"] + 2 and have["mk_cmd.bytes"] == have["mk_cmd.chunk"] + 4
    assert int(sync.REC_BYTES) == have["sizeof(mk_cmd)"]
    assert (int(sync.CTL_TAIL), int(sync.CTL_ABORT)) == (have["mk_ring_ctl.tail"], have["mk_ring_ctl.abort"])
    assert (int(sync.CHECK_EVERY), int(sync.ABORT_EVERY)) == (have["MK_WAIT_CHECK_EVERY"], have["MK_WAIT_ABORT_EVERY"])
    assert (int(sync.ROLE_COMPUTE), int(sync.ROLE_SEND)) == (have["MK_ROLE_COMPUTE"], have["MK_ROLE_SEND"])
    assert (int(sync.WHAT_FLAG), int(sync.WHAT_RING_SLOT), int(bulk.WHAT_STAGE)) == (
        have["MK_WHAT_FLAG"], have["MK_WHAT_RING_SLOT"], have["MK_WHAT_BULK_STAGE"])
    assert (int(sync.ERR_TIMEOUT), int(sync.ERR_ABORTED)) == (have["MK_ERR_TIMEOUT"], have["MK_ERR_ABORTED"])
    errors = {"rank": sync.E_RANK, "role": sync.E_ROLE, "what": sync.E_WHAT, "index": sync.E_INDEX,
              "epoch": sync.E_EPOCH, "observed": sync.E_SEEN, "expected": sync.E_EXPECTED, "task": sync.E_TASK}
    assert {f: int(v) for f, v in errors.items()} == {f: have[f"mk_dev_err.{f}"] for f in errors}


def test_the_device_side_is_one_copy_that_cites_the_one_spec():
    """The copies point at the spec; the device side is sync.py alone: no CUDA C++ copy, and the
    self-test kernels write no protocol code of their own (no inline assembly: their waits, ring
    pushes, signals and epochs are sync's)."""
    from pathlib import Path

    hw = Path(native.__file__).parents[1]
    assert not [p for ext in ("*.cu", "*.cuh") for p in hw.rglob(ext)], "a second (CUDA) copy of the device side"
    selftests = (hw / "measure" / "ring_kernels.py").read_text()
    assert "inline_asm" not in selftests and "from ..kernels.sync import" in selftests
    for path in (hw / "kernels" / "sync.py", hw / "runtime" / "csrc" / "proxy.c", hw / "runtime" / "csrc" / "host_ring.c"):
        assert "mk_ring.h" in path.read_text(), path
