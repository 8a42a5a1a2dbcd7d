"""The fused kernel's launch (hw/launch.py) on the CPU, with a stand-in for the Triton kernel: the
first call goes through the JIT entry with every argument by name and tensors as tensors (Triton
infers pointer types from them); later calls hand the compiled kernel the same argument list, in
parameter order, with this call's values in their places and pointers as integers."""
from __future__ import annotations

import pytest

from mkernel.hw.launch import Descriptors, Launch


class _Tensor:
    def __init__(self, ptr):
        self.ptr = ptr

    def data_ptr(self):
        return self.ptr


class _Compiled:
    function, packed_metadata = "fn", "meta"

    def __init__(self, log):
        self.log = log

    def run(self, *args):
        self.log.append(("run", args))


class _Kernel:
    arg_names = ["table", "bases", "n", "BLOCK"]
    __name__ = "stand_in"

    def __init__(self):
        self.log = []

    def __getitem__(self, grid):
        def jit(**kwargs):
            self.log.append(("jit", grid, kwargs))
            return _Compiled(self.log)
        return jit


def test_the_first_call_binds_by_name_and_later_calls_reuse_the_list():
    pytest.importorskip("triton", reason="the launch reads triton's launch hooks")
    k = _Kernel()
    table = _Tensor(4096)
    launch = Launch(k, 7, {"table": table, "n": 3, "BLOCK": 64}, {"num_warps": 8}, per_call=("bases",))
    launch(11, bases=_Tensor(512))
    kind, grid, kwargs = k.log[0]
    assert kind == "jit" and grid == (7,) and kwargs["table"] is table and kwargs["bases"].data_ptr() == 512
    assert kwargs["num_warps"] == 8
    launch(12, bases=_Tensor(1024))
    kind, args = k.log[1]
    assert args[:4] == (7, 1, 1, 12) and args[-4:] == (4096, 1024, 3, 64)


def test_unknown_or_missing_arguments_are_refused_at_build():
    k = _Kernel()
    with pytest.raises(TypeError, match=r"unknown arguments \['extra'\], missing \['n'\]"):
        Launch(k, 1, {"table": 1, "BLOCK": 1, "extra": 2}, {}, per_call=("bases",))


def test_descriptors_are_cached_by_address_and_hold_no_tensor():
    pytest.importorskip("triton", reason="descriptors are triton's")
    torch = pytest.importorskip("torch", reason="descriptors describe torch tensors")
    d = Descriptors((16, 32))
    t = torch.zeros(64, 64, dtype=torch.bfloat16)
    first = d(t)
    assert d(t) is first and first.base.data_ptr() == t.data_ptr() and not isinstance(first.base, torch.Tensor)
    assert d(torch.zeros(32, 64, dtype=torch.bfloat16)) is not first
