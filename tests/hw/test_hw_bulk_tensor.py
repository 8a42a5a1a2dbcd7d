"""The bulk path's 2-D box copies (hw/kernels/bulk_tensor.py, maps from hw/runtime/tensormap.py):
compiled for sm_90a without a GPU (tensor copies on mbarriers, the maps fenced, nothing built on
the device, nothing multicast), refusals before any launch, and on a GPU (marked gpu) every step
against torch on boxed regions at offsets that are not box multiples: outputs poisoned with NaN,
fresh seeded inputs, copies bit-exact, reduces bit-exact against the fp32 sum in source order (the
register and 1-D paths' result), accumulates within the bf16 criterion of the float64 sum.
"""
from __future__ import annotations

import pytest

from harness.bulk import buffers as _buffers
from harness.bulk import compiled
from harness.bulk import run as _run
from harness.bulk import same as _same

from mkernel.reference import BF16_RTOL

TENSOR_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
EXPECT = {"COPY": "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group",
          "ACCUMULATE": "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group",
          "REDUCE": "st.global.v4.b32"}


@pytest.mark.parametrize("op", sorted(EXPECT))
def test_box_steps_compile_to_tensor_copies_through_fenced_host_maps(op):
    """CI's check: box loads on mbarriers, the op's store, an acquire fence on each map before use,
    no device-built descriptor (no global scratch, no tensormap.replace), no multicast."""
    ptx = compiled(op, "TENSOR").asm["ptx"]
    for instr in (TENSOR_LOAD, EXPECT[op], "fence.proxy.tensormap::generic.acquire.sys", "mbarrier.try_wait.parity"):
        assert instr in ptx, instr
    assert compiled(op, "TENSOR").metadata.global_scratch_size == 0 and "tensormap.replace" not in ptx
    assert "multimem" not in ptx and ".multicast" not in ptx


def test_unboxed_regions_and_gathers_are_refused_before_any_launch():
    torch = pytest.importorskip("torch", reason="needs torch (tensors are refused by type and layout)")

    from mkernel.hw.measure import bulk_probe as bp

    bufs = [torch.zeros(64, 512, dtype=torch.bfloat16) for _ in range(2)]
    with pytest.raises(ValueError, match=r"task 0: region of 20 x 256 in buffer 0 .* is not 16 x 256 boxes"):
        bp.Probe(bp.Op.COPY, bp.Path.TENSOR, [bp.Task(((0, 0, 0, 20, 256),), ((1, 0, 0, 20, 256),))], bufs, 1)
    with pytest.raises(ValueError, match="the tensor path has no gather step"):
        bp.Probe(bp.Op.GATHER, bp.Path.TENSOR, [bp.Task(((0, 0, 0, 16, 256),), ((1, 0, 0, 16, 256),), (0,))], bufs, 1)
    with pytest.raises(ValueError, match="reduce_bytes 4096: the tensor path's reduce stage holds one 8192-byte box"):
        bp.Probe(bp.Op.REDUCE, bp.Path.TENSOR, [bp.Task(((0, 0, 0, 16, 256),), ((1, 0, 0, 16, 256),))], bufs, 1,
                 reduce_bytes=4096)


def test_a_map_needs_aligned_rows_and_a_whole_box():
    from mkernel.hw.runtime import tensormap

    assert tensormap.mappable(1 << 20, 16, 256)
    assert not tensormap.mappable((1 << 20) + 8, 16, 256)  # address not 16-byte aligned
    assert not tensormap.mappable(1 << 20, 16, 260)  # row stride 520 bytes
    assert not tensormap.mappable(1 << 20, 15, 256) and not tensormap.mappable(1 << 20, 16, 248)
    maps = tensormap.table([(0, 64, 512), (1 << 20, 15, 512)])  # neither gets a map
    assert maps.shape == (2, 32) and not maps.any()
    with pytest.raises(ValueError, match="has no tensor map"):
        tensormap.encode((1 << 20) + 8, 16, 256)


# boxed regions at rows and columns that are not box multiples; tasks of two pairs of different widths:
# 8 boxes then 1, and 3 (an odd count: the one-stage ring's parity carried into the next pair) then 1
SHAPES = [(100, 776), (100, 776), (64, 512), (64, 512)]


def _copy_tasks():
    from mkernel.hw.measure.bulk_probe import Task

    return [Task(((0, 3, 8, 32, 512),), ((1, 50, 264, 32, 512),)),
            Task(((2, 0, 0, 64, 512), (0, 40, 0, 16, 256)), ((3, 0, 0, 64, 512), (1, 84, 520, 16, 256))),
            Task(((0, 50, 0, 48, 256), (2, 0, 256, 16, 256)), ((1, 0, 0, 48, 256), (1, 84, 0, 16, 256)))]


@pytest.mark.gpu
@pytest.mark.parametrize("smem", [9 * 1024, 33 * 1024, 180 * 1024], ids=["one-stage", "four-stages", "ring"])
def test_box_copy_is_bit_exact_and_writes_nothing_else(smem):
    """One stage (lag 0), four (lag 2: the 8-box pair refills its stages, and the next pair starts
    mid-ring) and the whole ring."""
    import torch

    bufs = _buffers(torch, SHAPES, seed=11)
    for b in (bufs[1], bufs[3]):
        b.fill_(float("nan"))
    want1, want3 = bufs[1].clone(), bufs[3].clone()
    want1[50:82, 264:776] = bufs[0][3:35, 8:520]
    want1[84:100, 520:776] = bufs[0][40:56, 0:256]
    want1[0:48, 0:256] = bufs[0][50:98, 0:256]
    want1[84:100, 0:256] = bufs[2][0:16, 256:512]
    want3[:] = bufs[2]
    _run("COPY", "TENSOR", _copy_tasks(), bufs, smem=smem)
    assert _same(bufs[1], want1) and _same(bufs[3], want3)


@pytest.mark.gpu
@pytest.mark.parametrize("g", [1, 3, 8])
def test_box_reduce_is_the_fp32_sum_rounded_once_as_on_the_other_paths(g):
    import torch

    from mkernel.hw.measure.bulk_probe import Task

    shapes = [(100, 776)] * (g + 1)
    reads = lambda r0, c0, n, c: tuple((p, r0, c0, n, c) for p in range(g))
    tasks = [Task(reads(3, 8, 32, 512), ((g, 50, 264, 32, 512),)), Task(reads(40, 0, 48, 256), ((g, 0, 0, 48, 256),))]
    outs = {}
    for path in ("REGISTER", "BULK", "TENSOR"):
        bufs = _buffers(torch, shapes, seed=12 + g)
        bufs[g].fill_(float("nan"))
        _run("REDUCE", path, tasks, bufs, blocks=2)
        outs[path] = bufs[g]
    want = torch.full_like(bufs[0], float("nan"))
    for (r0, c0, n, c), (d0, e0) in (((3, 8, 32, 512), (50, 264)), ((40, 0, 48, 256), (0, 0))):
        acc = torch.zeros(n, c, dtype=torch.float32, device="cuda")
        for s in bufs[:g]:
            acc += s[r0:r0 + n, c0:c0 + c].float()
        want[d0:d0 + n, e0:e0 + c] = acc.bfloat16()
    for path, out in outs.items():
        assert _same(out, want), path


@pytest.mark.gpu
def test_box_accumulate_adds_every_source_into_the_owner_from_many_blocks_at_once():
    import torch

    from mkernel.hw.measure.bulk_probe import Task

    bufs = _buffers(torch, [(130, 520)] * 9, seed=13)
    start = bufs[8].double()
    tasks = [Task(((p, 1, 8, 128, 512),), ((8, 0, 0, 128, 512),)) for p in range(8)]
    _run("ACCUMULATE", "TENSOR", tasks, bufs, blocks=8)
    ref = start.clone()
    for p in range(8):
        ref[0:128, 0:512] += bufs[p][1:129, 8:520].double()
    rel = float((bufs[8].double() - ref).norm() / ref.norm())
    assert rel <= BF16_RTOL, rel
    assert torch.equal(bufs[8][128:], start[128:].bfloat16()) and torch.equal(bufs[8][:, 512:], start[:, 512:].bfloat16())


def test_the_per_sm_ceiling_probe_compiles_to_wide_loads_and_stores_for_sm90a():
    """tools/probes/sm_ceiling.py, the read / write / copy ceiling beside the bulk paths: each kind
    compiles for sm_90a to 16-byte global accesses (its point: the widest a register path issues),
    pinned to the SMs asked for by %smid, and bad arguments are exit 2 before any GPU work."""
    import importlib.util
    from pathlib import Path

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    path = Path(__file__).resolve().parents[2] / "tools" / "probes" / "sm_ceiling.py"
    spec = importlib.util.spec_from_file_location("sm_ceiling", path)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(3)}
    for kind, wants in (("read", ("ld.global.v4",)), ("write", ("st.global.v4",)), ("copy", ("ld.global.v4", "st.global.v4"))):
        k = triton.compile(ASTSource(fn=probe.stream_kernel, signature={"src": "*i32", "dst": "*i32", "out": "*i32",
                                                                         "counter": "*i32", "n_chunks": "i32",
                                                                         "n_sms": "i32"},
                                     constexprs={"KIND": probe.KINDS.index(kind), "BLOCK": 8192, "CHUNK": 16},
                                     attrs=attrs),
                           target=GPUTarget("cuda", 90, 32), options={"num_warps": 8})
        ptx = k.asm["ptx"]
        assert all(w in ptx for w in wants), kind
        assert ("ld.global" in ptx) == (kind != "write"), kind
        assert "%smid" in ptx, kind  # pinned: blocks off the SMs asked for leave
    assert probe.main(["--sms", "0"]) == 2 and probe.main(["--block", "1000"]) == 2
