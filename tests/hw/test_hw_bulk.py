"""The 1-D bulk-copy steps (hw/kernels/bulk.py, bulk_copy.py, bulk_reduce.py): compiled for sm_90a without a GPU (the PTX holds the bulk
copies, mbarriers and bf16 reduce-adds they are built from, and nothing multicast), and, on a GPU
(marked gpu), every step against torch on odd shapes: outputs poisoned with NaN, fresh seeded random
inputs, copies and gathers bit-exact, reduces bit-exact against the fp32 sum in source order (the
register path's result), accumulates within the bf16 criterion of the float64 sum.
"""
from __future__ import annotations

import re

import pytest
from harness.bulk import buffers as _buffers
from harness.bulk import compiled
from harness.bulk import run as _run
from harness.bulk import same as _same

from mkernel.reference import BF16_RTOL

# what each bulk step must emit: bulk loads completing on mbarriers, and its store kind
BULK_LOAD = "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
EXPECT = {"COPY": ("cp.async.bulk.global.shared::cta.bulk_group", "cp.async.bulk.wait_group.read"),
          "GATHER": ("cp.async.bulk.global.shared::cta.bulk_group",),
          "ACCUMULATE": ("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.bf16",),
          "REDUCE": ("ld.shared.v4.b32", "st.global.v4.b32", "cvt.rn.bf16x2.f32")}


@pytest.mark.parametrize("op", sorted(EXPECT))
def test_bulk_steps_compile_to_bulk_copies_for_sm90a(op):
    """CI's check: each bulk step is bulk loads on mbarriers plus its store kind; no descriptor
    (no global scratch, no tensormap), no multicast, and the data never passes through a global
    load into registers (only the task and region rows are loaded)."""
    k = compiled(op, "BULK")
    ptx = k.asm["ptx"]
    assert ".target sm_90a" in ptx
    for instr in (BULK_LOAD, "mbarrier.init.shared::cta.b64", "mbarrier.arrive.expect_tx.shared::cta.b64",
                  "mbarrier.try_wait.parity.shared::cta.b64", "mbarrier.inval.shared::cta.b64",
                  "%dynamic_smem_size", "fence.proxy.async.global") + EXPECT[op]:
        assert instr in ptx, instr
    assert "multimem" not in ptx and ".multicast" not in ptx
    assert k.metadata.global_scratch_size == 0 and "tensormap" not in ptx
    assert not re.search(r"ld\.global(\.[a-z0-9:_]+)*\.v[24]", ptx), "data loaded into registers"


@pytest.mark.parametrize("op", sorted(EXPECT))
def test_a_launch_of_one_task_still_declares_the_shared_memory_the_ring_uses(op):
    """Triton specialises an int argument equal to 1 as a constant; the probe's ``_declare_smem``
    must not fold away with it (ptxas: "Unknown symbol 'global_smem'", seen on the H200 with one
    task). Compiling through ptxas is the check."""
    k = compiled(op, "BULK", one_task=True)
    assert ".extern .shared .align 16 .b8 global_smem[];" in k.asm["ptx"] and k.asm["cubin"]


def test_refills_leave_stores_in_flight():
    """A copy refills a stage ``lag`` stores after its own: lag = min(LAG, stages - 1) is known at
    run time, so the PTX (compiled with LAG 2) waits with each immediate 0 ... 2, and none larger."""
    ptx = compiled("COPY", "BULK").asm["ptx"]
    for n in range(5):
        assert (f"cp.async.bulk.wait_group.read {n};" in ptx) == (n <= 2), n


@pytest.mark.parametrize("op", sorted(EXPECT))
def test_bulk_steps_use_no_triton_shared_memory_beside_their_ring(op):
    """The ring overlays Triton's shared memory, so inside a step Triton must allocate none: the
    probe's one block reduction is its ``_declare_smem`` (a branch never taken)."""
    k = compiled(op, "BULK")
    ttgir = k.asm["ttgir"]
    assert "ttg.local_alloc" not in ttgir and "ttg.convert_layout" not in ttgir
    assert ttgir.count('"tt.reduce"') + ttgir.count("tt.reduce(") == 1
    assert k.metadata.shared <= 1024  # the reduction's scratch, inside the mbarrier area


@pytest.mark.parametrize("op", sorted(EXPECT))
def test_every_asm_operand_has_its_constraints_width(op):
    """An int64 value bound to a 32-bit ("r") asm operand is silently truncated by LLVM: every
    inline asm operand of the bulk steps must have the type its constraint names."""
    width = {"r": "i32", "l": "i64", "f": "f32"}
    seen = 0
    for m in re.finditer(r'tt\.elementwise_inline_asm "[^"]*" \{constraints = "([^"]*)"[^}]*\}([^:]*): ([^-]*) ->',
                         compiled(op, "BULK").asm["ttgir"]):
        inputs = [c for c in m.group(1).split(",") if not c.startswith("=")]
        types = [re.sub(r"tensor<\d+x([a-z0-9]+),.*", r"\1", t.strip()) for t in re.split(r",(?![^<]*>)", m.group(3))]
        if inputs:
            assert [width[c] for c in inputs] == types, m.group(0)
            seen += 1
    assert seen >= 8


def test_the_register_path_probe_is_the_fused_kernels_16_byte_path():
    """The benchmark's baseline must be the kernel's real register path: 16-byte vector loads and
    stores, and no bulk copy."""
    for op in ("COPY", "REDUCE", "GATHER"):
        ptx = compiled(op, "REGISTER").asm["ptx"]
        assert re.search(r"ld\.global(\.[a-z0-9:_]+)*\.v4\.b32", ptx) and "st.global.v4.b32" in ptx, op
        assert "cp.async.bulk" not in ptx, op


def test_triton_tma_copy_builds_descriptors_in_global_scratch():
    """What the alternative emits (the reason bulk.py does not use it): 2-D TMA through device-built
    descriptors (global scratch, tensormap fences), the data through registers into a TMA store."""
    k = compiled("COPY", "TMA")
    ptx = k.asm["ptx"]
    assert "cp.async.bulk.tensor.2d.shared::cluster.global" in ptx
    assert "cp.async.bulk.tensor.2d.global.shared::cta" in ptx
    assert "tensormap.cp_fenceproxy" in ptx and k.metadata.global_scratch_size >= 256
    assert "ld.shared.v4" in ptx or "ld.shared.v2" in ptx or "ldmatrix" in ptx


def _epilogue_add_kernel():
    """A GEMM-style epilogue that reduce-adds its fp32 tile, as bf16, into an owner's buffer through
    a host-built descriptor (issue 27 item 2: the compute blocks push into the owner)."""
    import triton
    import triton.language as tl

    @triton.jit
    def epilogue_add(c_desc, x, BM: tl.constexpr, BN: tl.constexpr):
        rm = tl.arange(0, BM)
        rn = tl.arange(0, BN)
        acc = tl.load(x + rm[:, None] * BN + rn[None, :])
        c_desc.atomic_add([tl.program_id(0) * BM, 0], acc.to(tl.bfloat16))

    return epilogue_add


def test_a_descriptor_atomic_add_of_bf16_is_a_bulk_tensor_reduce_add():
    """What Triton 3.6 gives for the accumulate-into-owner epilogue: ``desc.atomic_add`` on a bf16
    host descriptor lowers to cp.reduce.async.bulk.tensor .add (the tile staged through shared
    memory), with no device-built descriptor and no global scratch."""
    triton = pytest.importorskip("triton", reason="triton is not installed (pip install 'mkernel[test]')")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig = {"c_desc": "tensordesc<bf16[128, 256]>", "x": "*fp32"}
    k = triton.compile(ASTSource(fn=_epilogue_add_kernel(), signature=sig, constexprs={"BM": 128, "BN": 256}),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": 8})
    ptx = k.asm["ptx"]
    assert "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add" in ptx and "multimem" not in ptx
    assert k.metadata.global_scratch_size == 0 and "tensormap.replace" not in ptx


def test_tables_lay_out_regions_tasks_and_gather_rows_as_the_plan_does():
    pytest.importorskip("triton", reason="triton is not installed (pip install 'mkernel[test]')")
    from mkernel.hw.measure.bulk_probe import Row, Task, tables
    from mkernel.hw.lowering.layout import Command, Region

    tasks, regions, aux = tables([Task(((0, 2, 8, 3, 16),), ((1, 0, 0, 3, 16),)),
                                  Task(((0, 0, 0, 4, 24),), ((1, 4, 0, 2, 24),), index=(3, 1))], [(5, 24), (8, 24)])
    assert tasks[:, [Row.R0, Row.NREADS, Row.A0, Row.A1]].tolist() == [[0, 1, 0, 0], [2, 1, 0, 2]]
    assert regions[0, [Region.SLOT, Region.ROW0, Region.COL0, Region.ROWS, Region.COLS, Region.LD,
                       Region.BUF_ROWS]].tolist() == [0, 2, 8, 3, 16, 24, 5]
    assert aux[:, Command.SOURCE_ROW].tolist() == [3, 1]
    with pytest.raises(ValueError, match=r"buffer 0, rows 2\+3, cols 4\+16\) of a 24-column buffer is not in 8-column"):
        tables([Task(((0, 2, 4, 3, 16),), ((1, 0, 0, 3, 16),))], [(8, 24), (8, 24)])
    with pytest.raises(ValueError, match=r"rows 6\+3, cols 0\+16\) is outside buffer 1 \(8 x 24\)"):
        tables([Task(((0, 0, 0, 3, 16),), ((1, 6, 0, 3, 16),))], [(8, 24), (8, 24)])


def _overlay_kernel():
    """A kernel whose blocks alternate a bulk copy with a Triton op that uses shared memory (a
    wgmma tile: its operands go through shared memory at offsets the ring also uses)."""
    import triton
    import triton.language as tl

    from mkernel.hw.kernels import bulk_copy

    @triton.jit
    def overlay(tasks, regions, bases, n_tasks, a, b, c, timeout_ns, err32, err64):
        rm = tl.arange(0, 64)
        # not pipelined (num_stages=1): a pipelined loop's next-iteration cp.async loads would land in the ring
        for i in tl.range(tl.program_id(0), n_tasks, tl.num_programs(0), num_stages=1):
            bulk_copy._copy(regions, bases, tl.load(tasks + 4 * i), tl.load(tasks + 4 * i + 1), timeout_ns, err32,
                            err64, 0, 1, i, 1, 16384, 2)
            x = tl.load(a + i * 4096 + rm[:, None] * 64 + rm[None, :])
            y = tl.load(b + i * 4096 + rm[:, None] * 64 + rm[None, :])
            tl.store(c + i * 4096 + rm[:, None] * 64 + rm[None, :], tl.dot(x, y))

    return overlay


def test_a_kernel_mixing_bulk_steps_and_triton_shared_memory_compiles():
    triton = pytest.importorskip("triton", reason="triton is not installed (pip install 'mkernel[test]')")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig = {"tasks": "*i64", "regions": "*i64", "bases": "*i64", "n_tasks": "i32", "a": "*bf16", "b": "*bf16",
           "c": "*fp32", "timeout_ns": "i64", "err32": "*i32", "err64": "*i64"}
    k = triton.compile(ASTSource(fn=_overlay_kernel(), signature=sig), target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": 8})
    assert "wgmma.mma_async" in k.asm["ptx"] and BULK_LOAD in k.asm["ptx"] and k.metadata.shared >= 8192
    # the loop is not software-pipelined: no cp.async into shared memory outlives an iteration
    assert "async_copy_global_to_local" not in k.asm["ttgir"] and "cp.async.ca" not in k.asm["ptx"]


# -- on a GPU -----------------------------------------------------------------------------------

# tiles that divide nothing: 100 x 264 regions at column 8 of 520-column buffers, whole-row regions
# (one contiguous line of 70 x 520 bf16: three 16 KiB stage pieces), rows wider than a stage
# (12000 bf16 = 24000 bytes: a full and a partial piece), a 16-byte region, and a task of two
# pairs of different widths
COPY_SHAPES = [(300, 520), (300, 520), (70, 12000), (70, 12000)]


def _copy_tasks():
    from mkernel.hw.measure.bulk_probe import Task

    return [Task(((0, 5, 8, 100, 264),), ((1, 190, 256, 100, 264),)),
            Task(((0, 105, 0, 70, 520),), ((1, 0, 0, 70, 520),)),
            Task(((2, 3, 0, 61, 12000), (0, 200, 16, 1, 8)), ((3, 1, 0, 61, 12000), (1, 299, 0, 1, 8))),
            Task(((0, 290, 0, 10, 520),), ((1, 100, 0, 10, 520),))]


@pytest.mark.gpu
@pytest.mark.parametrize("path,smem,lag", [("REGISTER", None, 0), ("BULK", 18 * 1024, 2), ("BULK", 48 * 1024, 2),
                                           ("BULK", 48 * 1024, 4), ("BULK", 200 * 1024, 0), ("BULK", 200 * 1024, 2),
                                           ("BULK", 200 * 1024, 4), ("TMA", None, 0)],
                         ids=["register", "bulk-one-stage", "bulk-48K", "bulk-48K-lag4", "bulk-200K-lag0", "bulk-200K",
                              "bulk-200K-lag4", "tma"])
def test_copy_on_odd_regions_is_bit_exact(path, smem, lag):
    """Every lag, including one the ring is too small for (48 KiB: two stages, so lag 1)."""
    import torch

    bufs = _buffers(torch, COPY_SHAPES, seed=1)
    for b in (bufs[1], bufs[3]):
        b.fill_(float("nan"))
    want1, want3 = bufs[1].clone(), bufs[3].clone()
    want1[190:290, 256:520] = bufs[0][5:105, 8:272]
    want1[0:70] = bufs[0][105:175]
    want1[299, 0:8] = bufs[0][200, 16:24]
    want1[100:110] = bufs[0][290:300]
    want3[1:62] = bufs[2][3:64]
    _run("COPY", path, _copy_tasks(), bufs, **({"smem": smem, "lag": lag} if smem else {}))
    assert _same(bufs[1], want1) and _same(bufs[3], want3)


@pytest.mark.gpu
@pytest.mark.parametrize("g", [1, 3, 8])
@pytest.mark.parametrize("smem", [48 * 1024, 200 * 1024])
@pytest.mark.parametrize("rb", [8192, 4096])
def test_reduce_is_the_fp32_sum_rounded_once_on_both_paths(g, smem, rb):
    """Both source shares (8 KiB: two elements per thread; 4 KiB: one), and rings of one to 24 stages."""
    import torch

    from mkernel.hw.measure.bulk_probe import Task

    shapes = [(257, 1040)] * g + [(257, 1040)]
    reads = lambda r0, c0, n, c: tuple((p, r0, c0, n, c) for p in range(g))
    tasks = [Task(reads(0, 8, 129, 264), ((g, 128, 776, 129, 264),)),  # a tile at another place
             Task(reads(129, 0, 128, 1040), ((g, 0, 0, 128, 1040),)),  # whole rows: one contiguous line
             Task(reads(0, 272, 100, 496), ((g, 129, 272, 100, 496),))]
    if g * rb + 1024 > smem:  # the ring's stage (g sources x rb, after the mbarriers) does not fit
        with pytest.raises(ValueError, match=f"the bulk ring holds no stage of {g * rb} bytes"):
            _run("REDUCE", "BULK", tasks, _buffers(torch, shapes, seed=2 + g), blocks=2, smem=smem, reduce_bytes=rb)
        return
    outs = {}
    for path in ("REGISTER", "BULK"):
        bufs = _buffers(torch, shapes, seed=2 + g)  # the same inputs on both paths
        bufs[g].fill_(float("nan"))
        _run("REDUCE", path, tasks, bufs, blocks=2, **({"smem": smem, "reduce_bytes": rb} if path == "BULK" else {}))
        outs[path] = bufs[g]
    srcs = bufs[:g]
    want = torch.full_like(srcs[0], float("nan"))
    for (r0, c0, n, c), (d0, e0) in (((0, 8, 129, 264), (128, 776)), ((129, 0, 128, 1040), (0, 0)),
                                     ((0, 272, 100, 496), (129, 272))):
        acc = torch.zeros(n, c, dtype=torch.float32, device="cuda")
        for s in srcs:  # in source order, as both paths sum
            acc += s[r0:r0 + n, c0:c0 + c].float()
        want[d0:d0 + n, e0:e0 + c] = acc.bfloat16()
    for path, out in outs.items():
        assert _same(out, want), path


@pytest.mark.gpu
@pytest.mark.parametrize("path", ["REGISTER", "BULK"])
@pytest.mark.parametrize("cols", [264, 12000])
def test_gather_picks_indexed_rows_with_repeats(path, cols):
    import torch

    from mkernel.hw.measure.bulk_probe import Task

    bufs = _buffers(torch, [(97, cols), (70, cols)], seed=3)
    g = torch.Generator().manual_seed(4)
    idx = torch.randint(0, 90, (50,), generator=g).tolist()
    idx[1] = idx[0]  # a repeat
    bufs[1].fill_(float("nan"))
    tasks = [Task(((0, 7, 0, 90, cols),), ((1, 3, 0, 16, cols),), tuple(idx[:16])),
             Task(((0, 7, 0, 90, cols),), ((1, 19, 0, 34, cols),), tuple(idx[16:]))]
    _run("GATHER", path, tasks, bufs)
    assert torch.equal(bufs[1][3:53], bufs[0][7:97][torch.tensor(idx)])
    assert bufs[1][:3].isnan().all() and bufs[1][53:].isnan().all()


@pytest.mark.gpu
def test_accumulate_adds_every_source_into_the_owner_even_from_many_blocks_at_once():
    """Eight tasks on eight blocks add eight sources into one destination tile at the same time
    (cp.reduce.async.bulk adds atomically per element): base + sum within the bf16 criterion."""
    import torch

    from mkernel.hw.measure.bulk_probe import Task

    bufs = _buffers(torch, [(130, 520)] * 8 + [(130, 520)], seed=5)
    start = bufs[8].double()
    tasks = [Task(((p, 1, 8, 129, 512),), ((8, 0, 0, 129, 512),)) for p in range(8)]
    _run("ACCUMULATE", "BULK", tasks, bufs, blocks=8)
    ref = start.clone()
    for p in range(8):
        ref[0:129, 0:512] += bufs[p][1:130, 8:520].double()
    rel = float((bufs[8].double() - ref).norm() / ref.norm())
    assert rel <= BF16_RTOL, rel
    assert torch.equal(bufs[8][129:], start[129:].bfloat16())  # nothing outside the tile
    assert torch.equal(bufs[8][:, 512:], start[:, 512:].bfloat16())


@pytest.mark.gpu
def test_too_little_shared_memory_is_an_error_not_a_hang():
    """A ring that cannot hold one stage records an error the host reads (what 2: a bulk stage)."""
    import torch

    from mkernel.hw.measure import bulk_probe as bp

    bufs = _buffers(torch, [(64, 256), (64, 256)], seed=6)
    task = bp.Task(((0, 0, 0, 64, 256),), ((1, 0, 0, 64, 256),))
    with pytest.raises(ValueError, match="the bulk ring holds no stage of 16384 bytes"):
        bp.Probe(bp.Op.COPY, bp.Path.BULK, [task], bufs, 1, smem=8 * 1024)
    probe = bp.Probe(bp.Op.COPY, bp.Path.BULK, [task], bufs, 1, smem=8 * 1024, refuse_small_ring=False)
    probe()
    torch.cuda.synchronize()
    err = probe.error()
    assert err is not None and "waiting on 2 " in err and "(saw 8192, needed 17408)" in err, err


@pytest.mark.gpu
def test_bulk_steps_and_triton_shared_memory_take_turns_in_one_block():
    """The ring overlays Triton's shared memory: each block copies, then multiplies through shared
    memory, ten times over; both results must be exact (the product against torch's fp32 matmul
    within fp32 accumulation error)."""
    import numpy as np
    import torch

    from mkernel.hw.measure.bulk_probe import Task, _raise_shared_limit, tables

    n = 10
    src, dst = _buffers(torch, [(n * 64, 520), (n * 64, 520)], seed=7)
    dst.fill_(float("nan"))
    a, b = (torch.randn(n, 64, 64, device="cuda").bfloat16() for _ in range(2))
    c = torch.full((n, 64, 64), float("nan"), device="cuda")
    t, r, _ = tables([Task(((0, 64 * i, 0, 64, 520),), ((1, 64 * i, 0, 64, 520),)) for i in range(n)],
                     [tuple(src.shape), tuple(dst.shape)])
    tasks, regions = torch.from_numpy(t).cuda(), torch.from_numpy(r).cuda()
    bases = torch.tensor([src.data_ptr(), dst.data_ptr()], dtype=torch.int64, device="cuda")
    err = torch.zeros(8, dtype=torch.int64, device="cuda")
    args = (tasks, regions, bases, n, a, b, c, 5 * 10**9, err.view(torch.int32), err)
    k = _overlay_kernel().warmup(*args, grid=(3,), num_warps=8)
    k._init_handles()
    shared = max(k.metadata.shared, 100 * 1024)
    _raise_shared_limit(k.function, shared)
    k.run(3, 1, 1, torch.cuda.current_stream().cuda_stream, k.function, (8, 1, shared), None, None, None,
          *[v.data_ptr() if hasattr(v, "data_ptr") else v for v in args])
    torch.cuda.synchronize()
    assert int(err[0]) == 0
    assert torch.equal(dst, src)
    assert torch.allclose(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)
    assert np.isfinite(c.cpu().numpy()).all()
