"""A standalone persistent, TMA-fed bf16 GEMM with fp32 accumulation, written in Triton: the yardstick
the fused kernel's GEMM tiles (:mod:`tiles`) are held against in benchmarks and probes
(``tools/bench/bench_compute.py``, ``tools/probes/gemm_*.py``). It is not the compute role: the fused
kernel runs ``tiles._gemm_rows`` and ``tiles._mma``, and `mkernel calibrate` times those.

Each program owns SMs' worth of output tiles (a strided walk over the tile grid, grouped along M for
L2 reuse). Before a tile it may wait, boundedly, until a ready flag for the tile's row block reaches
the call's epoch: that is how a fused op's compute role consumes inputs that communication delivers
(AllGather+GEMM, MoE) without a host synchronisation. The wait is the fused kernel's own
(:func:`sync._wait`, the protocol of ``csrc/mk_ring.h``, with no proxy to abort it); one that runs
out records rank, role, flag and epoch in the device error block and the tile is computed anyway,
so the kernel always finishes and the host check reports the failure.

Edge tiles need no special code: TMA loads out of bounds read zeros and TMA stores are clipped.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import triton
import triton.language as tl

from ..knobs import DEFAULTS
from .sync import ROLE_COMPUTE, _wait


@dataclass(frozen=True)
class Config:
    """One GEMM configuration. ``flatten`` lets Triton pipeline across tiles (overlapping a tile's
    epilogue with the next tile's loads), which pays off when K is short."""

    BM: int = 128
    BN: int = 256
    BK: int = 64
    GROUP_M: int = 8
    num_warps: int = 8
    num_stages: int = 3
    flatten: bool = False


CONFIGS = (Config(), Config(BN=128, num_stages=4))


def choose(M: int, N: int, K: int, sms: int) -> Config:
    """The configuration for a shape: big tiles unless they leave too many SMs idle in the last
    wave, and flattening for short K."""
    def wave_efficiency(c: Config) -> float:
        tiles = triton.cdiv(M, c.BM) * triton.cdiv(N, c.BN)
        return tiles / (triton.cdiv(tiles, sms) * sms)

    big, small = CONFIGS
    best = big if wave_efficiency(big) >= 0.85 or wave_efficiency(big) >= wave_efficiency(small) else small
    return Config(**{**asdict(best), "flatten": triton.cdiv(K, best.BK) <= 32})


@triton.jit
def gemm_kernel(a_desc, b_desc, c_desc, M, N, K, flags_ptr, epoch, timeout_ns, err32_ptr, err64_ptr, rank,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                NUM_PROGRAMS: tl.constexpr, WAIT: tl.constexpr, FLATTEN: tl.constexpr):
    """C[M, N] = A[M, K] @ B[K, N]; with WAIT, tile (m, n) first waits for flags[m] >= epoch."""
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    per_group = GROUP_M * tiles_n
    for tile in tl.range(pid, tiles_m * tiles_n, NUM_PROGRAMS, flatten=FLATTEN):
        group = tile // per_group
        first_m = group * GROUP_M
        group_m = min(tiles_m - first_m, GROUP_M)
        tm = first_m + (tile % group_m)
        tn = (tile % per_group) // group_m
        if WAIT:  # no proxy here (ctl 0): the wait gives up on its deadline or another tile's error only
            _wait(flags_ptr + tm, epoch, tm, epoch, -1, rank, ROLE_COMPUTE, timeout_ns, err32_ptr, err64_ptr, 0)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kt in range(k_tiles):
            a = a_desc.load([tm * BM, kt * BK])
            b = b_desc.load([kt * BK, tn * BN])
            acc = tl.dot(a, b, acc)
        c_desc.store([tm * BM, tn * BN], acc.to(tl.bfloat16))


def signature(c: Config, wait: bool) -> tuple[dict, dict]:
    """(signature, constexprs) for compiling gemm_kernel without a GPU (CI's compile check)."""
    sig = {"a_desc": f"tensordesc<bf16[{c.BM}, {c.BK}]>", "b_desc": f"tensordesc<bf16[{c.BK}, {c.BN}]>",
           "c_desc": f"tensordesc<bf16[{c.BM}, {c.BN}]>", "M": "i32", "N": "i32", "K": "i32",
           "flags_ptr": "*i64", "epoch": "i64", "timeout_ns": "i64", "err32_ptr": "*i32", "err64_ptr": "*i64",
           "rank": "i32"}
    const = {"BM": c.BM, "BN": c.BN, "BK": c.BK, "GROUP_M": c.GROUP_M, "NUM_PROGRAMS": 132, "WAIT": wait,
             "FLATTEN": c.flatten}
    return sig, const


def gemm(a, b, out=None, *, flags=None, epoch: int = 0, errors=None, rank: int = 0, timeout_s: float = DEFAULTS.timeout_s,
         num_programs: int | None = None, config: Config | None = None):
    """out = a @ b (bf16, fp32 accumulation) on ``num_programs`` persistent programs (default: all SMs).

    With ``flags`` (int64, one per BM-row block of ``a``), each tile waits until its row block's flag
    reaches ``epoch``; ``errors`` is the device ErrorBlock a timed-out wait writes into.
    """
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    M, K = a.shape
    K2, N = b.shape
    if K2 != K or a.dtype != torch.bfloat16 or b.dtype != torch.bfloat16:
        raise ValueError(f"gemm needs bf16 A[M, K] and B[K, N]; got {tuple(a.shape)} {a.dtype} and "
                         f"{tuple(b.shape)} {b.dtype}")
    if K % 8 or N % 8 or not (a.is_contiguous() and b.is_contiguous()):
        raise ValueError(f"gemm needs contiguous A and B with K ({K}) and N ({N}) multiples of 8: TMA rows must "
                         f"be 16-byte aligned")
    out = torch.empty((M, N), dtype=torch.bfloat16, device=a.device) if out is None else out
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    c = config or choose(M, N, K, num_programs or sms)
    programs = min(num_programs or sms, triton.cdiv(M, c.BM) * triton.cdiv(N, c.BN))
    wait = flags is not None
    if wait and flags.numel() < triton.cdiv(M, c.BM):
        raise ValueError(f"flags has {flags.numel()} entries; {triton.cdiv(M, c.BM)} row blocks need one each")
    dummy = torch.zeros(8, dtype=torch.int64, device=a.device) if errors is None else errors.words
    gemm_kernel[(programs,)](
        TensorDescriptor.from_tensor(a, [c.BM, c.BK]), TensorDescriptor.from_tensor(b, [c.BK, c.BN]),
        TensorDescriptor.from_tensor(out, [c.BM, c.BN]), M, N, K,
        flags if wait else dummy, epoch, int(timeout_s * 1e9), dummy.view(torch.int32), dummy, rank,
        BM=c.BM, BN=c.BN, BK=c.BK, GROUP_M=c.GROUP_M, NUM_PROGRAMS=programs, WAIT=wait, FLATTEN=c.flatten,
        num_warps=c.num_warps, num_stages=c.num_stages)
    return out
