"""The fused kernel's launch (hw/runtime/launch.py) on the CPU, with a stand-in for the Triton kernel: the
first call goes through the JIT entry with every argument by name and tensors as tensors (Triton
infers pointer types from them); later calls hand the compiled kernel the same argument list, in
parameter order, with this call's values in their places and pointers as integers."""
from __future__ import annotations

import pytest

from mkernel.hw.runtime.launch import Descriptors, Launch


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

    def __init__(self, compiled=None):
        self.log = []
        self.compiled = compiled

    def __getitem__(self, grid):
        def jit(**kwargs):
            self.log.append(("jit", grid, kwargs))
            return self.compiled or _Compiled(self.log)
        return jit


class _Launcher36:
    """The shape of Triton 3.6's CudaLauncher: ``launch`` wraps the C ``launcher`` in a closure."""

    launch_cooperative_grid, launch_pdl = 0, 0

    def __init__(self, log):
        def launcher(*args):
            log.append(("raw", args))

        def inner(*args):
            return launcher(*args)
        self.launch = inner

    def __call__(self, *args):
        raise AssertionError("the direct path must not call the Python wrapper")


class _Compiled36:
    function, packed_metadata = "fn", "meta"

    def __init__(self, log, signature):
        self.run = _Launcher36(log)
        self.src = type("Src", (), {"signature": signature})()
        self.metadata = type("Meta", (), {"global_scratch_size": 0, "profile_scratch_size": 0,
                                          "tensordesc_meta": None})()


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
    base = first.descriptor.base
    assert d(t) is first and base.data_ptr() == t.data_ptr() and not isinstance(base, torch.Tensor)
    assert d(torch.zeros(32, 64, dtype=torch.bfloat16)) is not first


def test_on_triton_36_later_calls_go_to_the_c_launch_with_a_flat_template():
    pytest.importorskip("triton", reason="the launch reads triton's launch hooks")
    log = []
    k = _Kernel(_Compiled36(log, {"table": "*i64", "bases": "*i64", "n": "i32", "BLOCK": "constexpr"}))
    launch = Launch(k, 3, {"table": _Tensor(64), "n": 5, "BLOCK": 32}, {}, per_call=("bases",))
    launch(1, bases=_Tensor(128))  # the JIT call
    launch(2, bases=_Tensor(256))
    launch(3, bases=_Tensor(512))
    raws = [args for kind, args in log if kind == "raw"]
    assert len(raws) == 2
    # Triton 3.6's C format "iiiKKppOOOOOO": grid, stream, function, cooperative, PDL, two scratch
    # buffers, kernel metadata, launch metadata, two hooks; then the kernel's arguments
    assert raws[1][:4] == (3, 1, 1, 3) and raws[1][4:13] == ("fn", 0, 0, None, None, "meta", None, None, None)
    assert raws[1][13:] == (64, 512, 5, 32)


def test_a_kernel_with_global_scratch_gets_one_aligned_buffer_on_both_paths(monkeypatch):
    """Device-built TMA descriptors (the attention tile's K and V) live in Triton's global scratch:
    the JIT call is given this launch's buffer through Triton's allocator (the caller's allocator
    restored after), and the direct C launch passes the same address, block slices included."""
    pytest.importorskip("triton", reason="the launch reads triton's launch hooks")
    from triton.runtime import _allocation

    from mkernel.hw.runtime import launch as launch_mod

    made = []

    def fake_allocate(self, size, alignment, stream=None):  # the CPU has no CUDA memory: record the request
        made.append((size, alignment))
        return launch_mod._Aligned(1000, alignment)

    monkeypatch.setattr(Launch, "_allocate", fake_allocate)
    log = []
    compiled = _Compiled36(log, {"table": "*i64", "bases": "*i64", "n": "i32", "BLOCK": "constexpr"})
    compiled.metadata.global_scratch_size, compiled.metadata.global_scratch_align = 256, 128
    seen = []

    class _ScratchKernel(_Kernel):
        def __getitem__(self, grid):
            def jit(**kwargs):
                seen.append(_allocation._allocator.get()(3 * 256, 128, None).data_ptr())
                return compiled
            return jit

    before = _allocation._allocator.get()
    launch = Launch(_ScratchKernel(), 3, {"table": _Tensor(64), "n": 5, "BLOCK": 32}, {}, per_call=("bases",))
    launch(1, bases=_Tensor(128))
    assert _allocation._allocator.get() is before  # the caller's allocator is theirs again
    launch(2, bases=_Tensor(256))
    raw = next(args for kind, args in log if kind == "raw")
    assert seen == [1024] and raw[7] == 1024  # 1000 rounded up to 128 bytes, the same on both paths
    assert made[-1] == (3 * 256, 128)  # one 256-byte slice per block of the grid of 3


def test_the_packer_expands_descriptors_as_triton_does_and_refuses_what_it_cannot_pack():
    from mkernel.hw.runtime.packed import signature_types

    sig = {"t": "*i64", "n": "i32", "s": "fp32", "d": "tensordesc<bf16[128, 64]>", "B": "constexpr"}
    names = ["t", "n", "s", "d", "B"]
    assert signature_types(sig, names, [{"swizzle": 3}]) == [
        "*i64", "i32", "fp32", "nvTmaDesc", "i32", "i32", "i64", "i64", "constexpr"]
    assert signature_types(sig, names, None) is None  # a descriptor lowered to a pointer: Triton's launcher
    assert signature_types({"t": ("*i64", "*i64")}, ["t"], None) is None  # a tuple argument


def test_a_packed_block_holds_each_parameter_where_the_launcher_would_put_it():
    """Every non-constexpr argument in order, each at its C type's bytes, a CUtensorMap copied into
    a 128-byte aligned slot, then the global and profile scratch pointers: what Triton's C launcher
    points its ``void *params[]`` at for the same flat argument list."""
    import ctypes
    import struct

    from mkernel.hw.runtime.packed import MAP_BYTES, Packed

    tensor_map = (ctypes.c_ubyte * MAP_BYTES)(*range(MAP_BYTES))
    types = ["*i64", "i32", "constexpr", "fp32", "bf16", "nvTmaDesc", "i32", "i64", "i1", "*i64"]
    values = [0x7F0012345600, -7, 64, 0.125, 1.5, "map", 300, 1 << 40, True, None]
    block = Packed(types, values, global_scratch=0xABC00, map_address=lambda obj: ctypes.addressof(tensor_map))
    p = [block.params[i] for i in range(len(block.params))]
    assert len(p) == 9 + 2  # nine non-constexpr arguments, then the two scratch pointers
    assert ctypes.c_uint64.from_address(p[0]).value == 0x7F0012345600
    assert ctypes.c_int32.from_address(p[1]).value == -7
    assert ctypes.c_uint32.from_address(p[2]).value == struct.unpack("<I", struct.pack("<f", 0.125))[0]
    assert ctypes.c_uint16.from_address(p[3]).value == struct.unpack("<I", struct.pack("<f", 1.5))[0] >> 16
    assert p[4] % MAP_BYTES == 0 and bytes((ctypes.c_ubyte * MAP_BYTES).from_address(p[4])) == bytes(range(MAP_BYTES))
    assert ctypes.c_int32.from_address(p[5]).value == 300 and ctypes.c_int64.from_address(p[6]).value == 1 << 40
    assert ctypes.c_int8.from_address(p[7]).value == 1 and ctypes.c_uint64.from_address(p[8]).value == 0
    assert ctypes.c_uint64.from_address(p[9]).value == 0xABC00 and ctypes.c_uint64.from_address(p[10]).value == 0
    with pytest.raises(TypeError, match="not a Triton CUtensorMap"):
        Packed(["nvTmaDesc"], [object()], 0)


class _Driver:
    def __init__(self):
        self.launches = []

    def launch(self, function, grid, threads, shared, stream, packed):
        self.launches.append((function, grid, threads, shared, stream, packed))


def test_a_keyed_call_is_packed_once_and_later_calls_of_its_key_launch_the_block(monkeypatch):
    pytest.importorskip("triton", reason="the launch reads triton's launch hooks")
    from mkernel.hw.runtime import launch as launch_mod

    drv = _Driver()
    monkeypatch.setattr(launch_mod, "driver", lambda: drv)
    log = []
    compiled = _Compiled36(log, {"table": "*i64", "bases": "*i64", "n": "i32", "BLOCK": "constexpr"})
    compiled.packed_metadata = (8, 1, 4096)  # num_warps, num_ctas, shared bytes
    launch = Launch(_Kernel(compiled), 3, {"table": _Tensor(64), "n": 5, "BLOCK": 32}, {}, per_call=("bases",))
    launch(1, bases=_Tensor(128))  # the JIT call
    assert not launch.cached(2, "k1")
    launch(2, key="k1", bases=_Tensor(256))  # packed under its key, launched through the driver
    assert launch.cached(3, "k1") and not launch.cached(3, "k2")
    assert not [kind for kind, _ in log if kind == "raw"]  # Triton's C launcher parsed nothing
    (f1, g1, t1, s1, st1, b1), (_, _, _, _, st2, b2) = drv.launches
    assert (f1, g1, t1, s1, st1, st2) == ("fn", 3, 256, 4096, 2, 3) and b1 is b2
    import ctypes
    assert [ctypes.c_uint64.from_address(b1.params[i]).value for i in range(2)] == [64, 256]
    assert ctypes.c_int32.from_address(b1.params[2]).value == 5

    class _Listening:
        calls = [print]
    monkeypatch.setattr(launch_mod.knobs(), "launch_enter_hook", _Listening())
    assert not launch.cached(4, "k1")  # a profiler listens: the launch describes itself through Triton


def test_the_maps_table_encodes_the_static_slots_once_and_a_call_only_its_bound_ones(monkeypatch):
    """Addresses: every rank's heap slots get their tensor maps at construction; a call with new
    addresses encodes only this rank's bound buffers; slots without a map (other ranks' bound
    buffers, non-bf16 buffers, unmappable shapes) stay zero, their MAPPED_WORD 0."""
    import numpy as np

    from mkernel.hw.kernels.bulk_tensor import MAPPED_WORD
    from mkernel.hw.runtime import tensormap
    from mkernel.hw.runtime.launch import Addresses

    encoded = []
    monkeypatch.setattr(tensormap, "encode", lambda a, r, c: encoded.append((a, r, c)) or (a).to_bytes(8, "little") * 16)
    world, rank = 2, 1
    # buffer 0: heap, bf16 64 x 512; buffer 1: bound (0 in the static table), bf16 32 x 256; buffer 2: heap, fp32
    static = np.array([1 << 20, 2 << 20, 0, 0, 3 << 20, 4 << 20], np.int64)
    shapes = [(64, 512), (32, 256), None]
    a = Addresses(static, rank, world, "cpu", shapes)
    assert encoded == [(1 << 20, 64, 512), (2 << 20, 64, 512)]
    encoded.clear()
    table, maps = a.tables((0, 5 << 20, 0))
    assert encoded == [(5 << 20, 32, 256)] and table[1 * world + rank] == 5 << 20
    assert maps[:, MAPPED_WORD].tolist() == [1, 1, 0, 1, 0, 0]
    assert maps[3, 0] == 5 << 20 and not maps[2].any() and not maps[4:].any()


def test_the_register_path_maps_no_slot_but_its_table_has_a_row_for_every_slot(monkeypatch):
    """Without shapes (HwKnobs.data_path = "register") nothing is encoded, yet the kernel's accumulating
    copy looks up every slot's MAPPED_WORD to choose boxes or 1-D pieces (fused._copy_add): the table
    must cover every slot, all unmapped, or that lookup reads past it."""
    import numpy as np

    from mkernel.hw.kernels.bulk_tensor import ENTRY_WORDS
    from mkernel.hw.runtime import tensormap
    from mkernel.hw.runtime.launch import Addresses

    monkeypatch.setattr(tensormap, "encode", lambda *a: pytest.fail("the register path encodes no map"))
    static = np.array([1 << 20, 2 << 20, 0, 0], np.int64)
    a = Addresses(static, 0, 2, "cpu", None)
    table, maps = a.tables((0, 5 << 20))
    assert maps.shape == (len(static), ENTRY_WORDS) and not maps.any() and table[2] == 5 << 20
