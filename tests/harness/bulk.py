"""Shared by the bulk-path tests (tests/hw/test_hw_bulk.py, test_hw_bulk_tensor.py): the probe kernel
compiled for sm_90a without a GPU, and on a GPU, seeded buffers, one checked probe launch, and the
comparison that treats NaN (unwritten) as a value.
"""
from __future__ import annotations

import functools

import pytest

POINTERS = ("tasks", "regions", "bases", "maps", "aux", "err32", "err64")
SIGNATURE = {"tasks": "*i64", "regions": "*i64", "bases": "*i64", "maps": "*i64", "aux": "*i64", "n_tasks": "i32",
             "timeout_ns": "i64", "err32": "*i32", "err64": "*i64"}


@functools.cache
def compiled(op: str, path: str, one_task: bool = False):
    """The probe kernel for one op and path, for sm_90a, with the 16-byte alignment a launch's
    tensors give Triton (without it the register path falls back to 2-byte accesses); with
    ``one_task``, n_tasks is the constant 1, as Triton specialises a launch with one task."""
    triton = pytest.importorskip("triton", reason="triton is not installed (pip install 'mkernel[test]')")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from mkernel.hw.measure import bulk_probe as bp

    names = bp.steps_kernel.arg_names
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in POINTERS}
    const = dict(OP=int(bp.Op[op]), PATH=int(bp.Path[path]), CR=64, CC=256, SB=16384, RB=8192, STAGES=4, LAG=2)
    signature = dict(SIGNATURE)
    if one_task:
        signature["n_tasks"] = "constexpr"
        const["n_tasks"] = 1
    return triton.compile(ASTSource(fn=bp.steps_kernel, signature=signature, constexprs=const, attrs=attrs),
                          target=GPUTarget("cuda", 90, 32), options={"num_warps": bp.NUM_WARPS})


def buffers(torch, shapes, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(r, c, generator=g, device="cuda").bfloat16() for r, c in shapes]


def run(op: str, path: str, tasks, bufs, blocks: int = 3, **kw) -> None:
    import torch
    import triton

    from mkernel.hw.measure import bulk_probe as bp

    if path == "TMA":  # device-built descriptors live in the launch's global scratch
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    probe = bp.Probe(bp.Op[op], bp.Path[path], tasks, bufs, blocks, **kw)
    probe()
    torch.cuda.synchronize()
    assert probe.error() is None, probe.error()


def same(got, want) -> bool:
    """Equal, NaN where the other is NaN (unwritten) and bit-exact elsewhere."""
    import torch

    return bool((got.isnan() == want.isnan()).all()) and torch.equal(got[~got.isnan()], want[~want.isnan()])
