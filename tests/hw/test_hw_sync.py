"""The device waits' error path on CPU (compiled for sm_90a, no GPU): a wait and the error record hold
no barrier. A wait's warps leave it on their own - one times out, another sees the flag or the
error first - so anything some may reach and others not must not hold a `bar.sync`; with one, the
warps met at different barriers and ran on out of step (what the 2x2 runs' "illegal instruction"
looks like: docs/results/2026-12-01-reliability-hw-2.md)."""
from __future__ import annotations

import re

import pytest

triton = pytest.importorskip("triton", reason="triton is not installed (pip install 'mkernel[test]')")
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from mkernel.hw.kernels.sync import _push, _record, _wait  # noqa: E402


@triton.jit
def _wait_kernel(addr, target, err32, err64, ctl, rank, out):
    _wait(addr, target, 3, 7, 11, rank, 1, 1000, err32, err64, ctl)
    tl.store(out, 1)


@triton.jit
def _record_kernel(err32, err64, rank, out):
    if tl.load(out) != 0:
        _record(err32, err64, 8, rank, 2, 0, 5, 42, 0, 42, 31)


def _ptx(fn, sig: dict) -> str:
    k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs={}), target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": 8})
    return k.asm["ptx"]


def test_a_wait_and_its_error_record_hold_no_barrier():
    wait = _ptx(_wait_kernel, {"addr": "i64", "target": "i64", "err32": "*i32", "err64": "*i64", "ctl": "i64",
                               "rank": "i32", "out": "*i32"})
    record = _ptx(_record_kernel, {"err32": "*i32", "err64": "*i64", "rank": "i32", "out": "*i32"})
    for ptx in (wait, record):
        assert "bar.sync" not in ptx and "barrier" not in ptx
        assert "atom.global.acq_rel.gpu.cas.b32" in ptx  # the first error still wins
    assert record.count("st.global.u64") == 5 and record.count("st.global.u32") == 3  # every field written



def test_a_block_reduction_covers_every_thread_of_the_kernel():
    """_block_max's tensor must span every thread of the fused kernel's blocks: a layout that covers
    more elements than the tensor has repeats it in the last warps, whose own values then drop out."""
    from mkernel.hw.kernels.fused import NUM_WARPS
    from mkernel.hw.kernels.sync import _block_max

    @triton.jit
    def kernel(out):
        tl.store(out, _block_max(tl.program_id(0) + 0))

    k = triton.compile(ASTSource(fn=kernel, signature={"out": "*i32"}, constexprs={}),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": NUM_WARPS})
    size = int(re.search(r"tensor<(\d+)xi32", k.asm["ttgir"]).group(1))
    assert size >= NUM_WARPS * 32


@triton.jit
def _push_kernel(kind, dst_rank, flag, nbytes, records, ctl, head, capacity, err32, err64):
    _push(kind, dst_rank, flag, nbytes, flag, flag, 7, records, ctl, head, capacity, -1, 0, 1000, err32, err64)


def _push_asm() -> dict:
    k = triton.compile(ASTSource(fn=_push_kernel, signature={
        "kind": "i32", "dst_rank": "i32", "flag": "i64", "nbytes": "i64", "records": "i64", "ctl": "i64",
        "head": "*i64", "capacity": "i64", "err32": "*i32", "err64": "*i64"}, constexprs={}),
        target=GPUTarget("cuda", 90, 32), options={"num_warps": 8})
    return k.asm


def _while_body(ttgir: str) -> str:
    """The text of the (one) scf.while loop: both its regions, by brace depth."""
    lines = ttgir.splitlines()
    first = next(i for i, line in enumerate(lines) if "scf.while" in line)
    depth, body = 0, []
    for line in lines[first:]:
        body.append(line)
        depth += line.count("{") - line.count("}")
        if depth == 0 and len(body) > 1:
            return "\n".join(body)
    raise AssertionError("unterminated scf.while")


def test_a_push_waiting_for_credit_reads_the_host_tail_from_one_thread_and_holds_no_barrier():
    """Producers wait on the device copy of the tail; the host's (over PCIe) is read only by the thread
    holding the poller lock, which thread 0 of a block tries (64 blocks polling host memory slowed the
    proxy's driver calls 700-fold, 2026-12-05). Nothing in the wait may be a block barrier or a Triton
    scalar atomic (which brings one): warps leave it at different turns."""
    asm = _push_asm()
    ptx, loop = asm["ptx"], _while_body(asm["ttgir"])
    assert "nanosleep" in ptx  # the wait backs off
    assert "gpu.barrier" not in loop and "tt.atomic" not in loop, loop
    assert ptx.count("ld.acquire.sys.global.u64") == 2  # the host tail and abort word, by the lock holder alone
    lock = "@p atom.global.acquire.gpu.cas.b64"  # tried by tid.x == 0 only
    assert lock in ptx and "setp.eq.u32 p, t, 0" in ptx
    assert ptx.index(lock) < ptx.index("ld.acquire.sys.global.u64")
    # the copy: raised with release by the holder, read with acquire by every waiter (fast path and loop)
    assert "atom.global.release.gpu.max.s64" in ptx and "atom.global.release.gpu.exch.b64" in ptx
    assert ptx.count("ld.acquire.gpu.global.u64") >= 2 and "ld.volatile.global.b64" not in ptx


def test_a_push_waiting_for_credit_gives_up_once_another_block_failed():
    """A ring-slot credit wait reads the error word, as a flag wait does: after one failure, every other
    push stops there instead of waiting out its own timeout (a PUT task's pushes would otherwise take a
    timeout each, in turn: minutes for a stuck proxy, 2026-12-05)."""
    ptx = _push_asm()["ptx"]
    loop = ptx[ptx.index("globaltimer"):]  # the credit wait starts by reading the clock
    assert "ld.acquire.sys.global.u64" in loop  # the tail, polled
    assert re.search(r"ld\.volatile\.global\.(b|u|s)32", loop), "the credit wait never reads err32"


GO_BOUND_PROBE = """
import torch, triton
import triton.language as tl
from mkernel.hw.kernels.sync import _go_bound

@triton.jit
def probe(barrier_ns, timeout_ns, out):
    tl.store(out, _go_bound(barrier_ns, timeout_ns))

out = torch.zeros(1, dtype=torch.int64)
for b, t in ((2_000_000_000, 2_000_000_000), (1_500_000_000, 2_000_000_000), (300_000_000_000, 10_000_000_000)):
    probe[(1,)](b, t, out)  # ints below 2^31 arrive as int32, as on the GPU
    print(b, t, int(out.item()))
"""


def test_the_go_flag_bound_does_not_wrap_when_the_bounds_arrive_as_int32():
    """The go waiters' bound (twice block 0's plus a push's) is summed in 64 bits. With 2 s bounds Triton
    passes both as int32, and the sum wrapped to 1.7 s: the go waiters then timed out before block 0,
    whose error names the missing peer (the GEMM+RS failures under a delayed proxy, 2026-12-05).
    Run by Triton's interpreter (CPU), which types a scalar argument as the GPU launch does."""
    import os
    import subprocess
    import sys

    pytest.importorskip("torch", reason="Triton's interpreter runs on torch tensors")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", GO_BOUND_PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [tuple(map(int, line.split())) for line in done.stdout.split("\n") if line.strip()]
    assert len(rows) == 3, done.stdout
    for b, t, got in rows:
        assert got == 2 * b + t, (b, t, got)
