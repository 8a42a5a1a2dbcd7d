"""Why the fused GEMM tile misses cuBLAS on shapes no tile divides, and whether stream-K closes it.

Two questions, one device call (issue 26, item 2):

1. **Where the odd shapes lose.** The persistent 128 x 256 GEMM (hw/kernels/gemm.py, flattened, the
   fused kernel's tile) on each odd shape as given, on the same shape inside buffers whose rows are
   padded to 128-byte multiples (TMA rows that start on a cache line), and on the nearest shape
   every tile divides; torch.matmul on each in the same run. Padding isolates misaligned rows; the
   dividing shape isolates edge tiles.
2. **Stream-K for the last waves.** ``sk_gemm`` runs the first whole waves of tiles data-parallel
   (one tile per program per wave, as the fused kernel does) and splits the K iterations of the
   remaining tiles (the partial wave plus one whole wave) evenly over every program, so no SM idles
   in the last wave. A tile split between programs is finished by the program that holds its first
   K iteration: the others leave fp32 partials in a workspace and release a flag (the call's
   epoch); the owner waits for them (bounded), sums and stores. Every program is resident (grid =
   SMs), and a program contributes only at the start of its range and waits only at its end, so
   the waits cannot cycle.

Every variant is checked against float64 on fresh inputs with the output poisoned (NaN) first.

Measured once (call23, docs/results/2026-12-04-world1-gemm-attention.md): stream-K lost everywhere but on a
few-tile, long-K shape, and its 9-tile case was wrong: programs with an empty range were waited for
and summed (fixed here after the call, not measured since).

    python3 tools/probes/gemm_streamk.py --out streamk.json
"""
from __future__ import annotations

import argparse
import json

import torch
import triton
import triton.language as tl
from triton.testing import do_bench_cudagraph
from triton.tools.tensor_descriptor import TensorDescriptor

from mkernel.hw.kernels.gemm import Config, gemm
from mkernel.hw.kernels.sync import ROLE_COMPUTE, _wait

ODD = [(5000, 3000, 7000), (3000, 5000, 1000), (12000, 9000, 2056)]
GRID = [(4096, 4096, 512), (8192, 8192, 512), (4096, 4096, 1024), (16384, 16384, 512), (8192, 8192, 8192)]
SMALL = [(1000, 2000, 4096), (384, 768, 512), (640, 2048, 13000)]  # fewer tiles than SMs; ranges inside one tile
BM, BN, BK, GROUP_M = 128, 256, 64, 8


@triton.jit
def _coords(tile, tiles_m, tiles_n, GROUP_M: tl.constexpr):
    per_group = GROUP_M * tiles_n
    first_m = (tile // per_group) * GROUP_M
    group_m = tl.minimum(tiles_m - first_m, GROUP_M)
    return first_m + (tile % group_m), (tile % per_group) // group_m


@triton.jit
def sk_gemm(a_desc, b_desc, c_desc, c_ptr, ldc, ws_ptr, flags_ptr, err32, err64, M, N, K, epoch_ptr, done_ptr, dp_tiles, sk_tiles,
            timeout_ns, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
            P: tl.constexpr, CH: tl.constexpr):
    pid = tl.program_id(0)
    epoch = tl.load(epoch_ptr, volatile=True) + 1  # on the device, so graph replays wait for their own partials
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    ki = tl.cdiv(K, BK)
    for tile in tl.range(pid, dp_tiles, P, flatten=True):  # whole waves: a tile per program
        tm, tn = _coords(tile, tiles_m, tiles_n, GROUP_M)
        acc = tl.zeros((BM, BN), tl.float32)
        for kt in range(ki):
            acc = tl.dot(a_desc.load([tm * BM, kt * BK]), b_desc.load([kt * BK, tn * BN]), acc)
        c_desc.store([tm * BM, tn * BN], acc.to(tl.bfloat16))
    units = sk_tiles * ki  # the rest: K iterations split evenly over the programs
    u = (pid * units) // P
    u1 = ((pid + 1) * units) // P
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    while u < u1:
        t = u // ki
        k_lo = u - t * ki
        k_hi = tl.minimum(ki, k_lo + (u1 - u))
        tm, tn = _coords(dp_tiles + t, tiles_m, tiles_n, GROUP_M)
        acc = tl.zeros((BM, BN), tl.float32)
        for kt in range(k_lo, k_hi):
            acc = tl.dot(a_desc.load([tm * BM, kt * BK]), b_desc.load([kt * BK, tn * BN]), acc)
        if (k_lo == 0) & (k_hi == ki):
            c_desc.store([tm * BM, tn * BN], acc.to(tl.bfloat16))
        else:
            # two slots per program: a contributor's partial (its range's first tile) and an owner's
            # (its last), which a program may hold at once while its left neighbour still reads the first
            slot = ws_ptr + (2 * pid + (k_lo == 0).to(tl.int32)).to(tl.int64) * (BM * BN)
            tl.store(slot + rm[:, None] * BN + rn[None, :], acc)
            tl.debug_barrier()
            if k_lo != 0:
                tl.atomic_xchg(flags_ptr + pid, epoch, sem="release", scope="gpu")
            else:
                q_end = tl.minimum(P, tl.cdiv((t + 1) * ki * P, units))  # programs whose range starts in this tile
                for q in range(pid + 1, q_end):
                    if ((q + 1) * units) // P > (q * units) // P:  # an empty range contributes nothing (call23's bug)
                        _wait(flags_ptr + q, epoch, q, epoch, t, 0, ROLE_COMPUTE, timeout_ns, err32, err64, 0)
                tl.debug_barrier()
                for r in tl.static_range(0, BM, CH):
                    rows = r + tl.arange(0, CH)
                    s = tl.load(slot + rows[:, None] * BN + rn[None, :])
                    for q in range(pid + 1, q_end):
                        if ((q + 1) * units) // P > (q * units) // P:
                            s += tl.load(ws_ptr + (2 * q).to(tl.int64) * (BM * BN) + rows[:, None] * BN + rn[None, :])
                    gr = tm * BM + rows
                    gc = tn * BN + rn
                    tl.store(c_ptr + gr[:, None].to(tl.int64) * ldc + gc[None, :], s.to(tl.bfloat16),
                             mask=(gr[:, None] < M) & (gc[None, :] < N))
        u += k_hi - k_lo
    tl.debug_barrier()
    if tl.atomic_add(done_ptr, 1, sem="acq_rel", scope="gpu") == P - 1:  # the last program: the next call's epoch
        tl.store(done_ptr, 0)
        tl.store(epoch_ptr, epoch)


class StreamK:
    """sk_gemm with its workspace, flags and device epoch, built once per device."""

    def __init__(self, programs: int):
        self.p = programs
        self.ws = torch.empty(2 * programs * BM * BN, dtype=torch.float32, device="cuda")
        self.flags = torch.zeros(programs, dtype=torch.int64, device="cuda")
        self.err = torch.zeros(16, dtype=torch.int64, device="cuda")
        self.state = torch.zeros(2, dtype=torch.int64, device="cuda")  # the epoch, programs done

    def split(self, m: int, n: int) -> tuple[int, int]:
        tiles = triton.cdiv(m, BM) * triton.cdiv(n, BN)
        if tiles % self.p == 0:
            return tiles, 0
        sk = tiles if tiles < self.p else tiles % self.p + self.p
        return tiles - sk, sk

    def __call__(self, a, b, out):
        m, k = a.shape
        n = b.shape[1]
        dp, sk = self.split(m, n)
        sk_gemm[(self.p,)](TensorDescriptor.from_tensor(a, [BM, BK]), TensorDescriptor.from_tensor(b, [BK, BN]),
                           TensorDescriptor.from_tensor(out, [BM, BN]), out, out.stride(0), self.ws, self.flags,
                           self.err.view(torch.int32), self.err, m, n, k, self.state, self.state[1:], dp, sk, int(5e9), BM=BM, BN=BN, BK=BK, GROUP_M=GROUP_M,
                           P=self.p, CH=32, num_warps=8, num_stages=3)
        return out


def _padded(rows: int, cols: int, scale: float = 1.0):
    """A rows x cols bf16 view whose rows start 128 bytes apart (64 bf16), inside a wider buffer."""
    ld = -(-cols // 64) * 64
    return (torch.randn(rows, ld, device="cuda", dtype=torch.bfloat16) * scale)[:, :cols]


def _rel(out, ref) -> float:
    return float((out.double() - ref).norm() / ref.norm())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="streamk.json")
    args = ap.parse_args()
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    sk = StreamK(sms)
    flat = Config(flatten=True)
    rows = []

    def record(name, m, n, k, fn, a, b, out, torch_fn):
        ref = a.double() @ b.double()
        errs = []
        for _ in range(2):  # fresh inputs, poisoned output, twice (a race shows as a moving error)
            a.copy_(torch.randn_like(a))
            b.copy_(torch.randn_like(b) * k ** -0.5)
            ref = a.double() @ b.double()
            out.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            errs.append(_rel(out, ref))
        us = do_bench_cudagraph(fn, rep=100) * 1e3
        t_us = do_bench_cudagraph(torch_fn, rep=100) * 1e3
        row = {"name": name, "m": m, "n": n, "k": k, "us": us, "torch_us": t_us, "ratio": t_us / us,
               "rel_err": max(errs), "err_word": int(sk.err[0].item())}
        rows.append(row)
        print(f"{name:10s} {m:5d}x{n:5d}x{k:5d} {us:9.1f} us  torch {t_us:9.1f}  ratio {t_us / us:.3f}  "
              f"err {max(errs):.1e}/{min(errs):.1e}", flush=True)

    for m, n, k in ODD + GRID + SMALL:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) * k ** -0.5
        out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        dp, skt = sk.split(m, n)
        print(f"-- {m}x{n}x{k}: tiles {dp + skt}, data-parallel {dp}, stream-K {skt}", flush=True)
        record("flat", m, n, k, lambda: gemm(a, b, out, config=flat), a, b, out, lambda: a @ b)
        record("streamk", m, n, k, lambda: sk(a, b, out), a, b, out, lambda: a @ b)
        if (m, n, k) in ODD:
            ap_, bp_ = _padded(m, k), _padded(k, n, k ** -0.5)
            outp = _padded(m, n)
            record("flat-pad", m, n, k, lambda: _gemm_strided(ap_, bp_, outp, flat), ap_, bp_, outp, lambda: ap_ @ bp_)
            record("sk-pad", m, n, k, lambda: sk(ap_, bp_, outp), ap_, bp_, outp, lambda: ap_ @ bp_)
            mr, nr, kr = (-(-x // t) * t for x, t in ((m, BM), (n, BN), (k, BK)))
            ar = torch.randn(mr, kr, device="cuda", dtype=torch.bfloat16)
            br = torch.randn(kr, nr, device="cuda", dtype=torch.bfloat16) * kr ** -0.5
            outr = torch.empty(mr, nr, device="cuda", dtype=torch.bfloat16)
            record("flat-div", mr, nr, kr, lambda: gemm(ar, br, outr, config=flat), ar, br, outr, lambda: ar @ br)
        with open(args.out, "w") as f:
            json.dump({"sms": sms, "rows": rows}, f, indent=1)
    print(f"error word after all runs: {sk.err.tolist()[:2]}")


def _gemm_strided(a, b, out, c: Config):
    """hw/kernels/gemm.py's kernel on strided (padded) views: the same launch with the views' strides."""
    from mkernel.hw.kernels.gemm import gemm_kernel

    m, k = a.shape
    n = b.shape[1]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    dummy = torch.zeros(8, dtype=torch.int64, device="cuda")
    programs = min(sms, triton.cdiv(m, c.BM) * triton.cdiv(n, c.BN))
    gemm_kernel[(programs,)](TensorDescriptor.from_tensor(a, [c.BM, c.BK]), TensorDescriptor.from_tensor(b, [c.BK, c.BN]),
                             TensorDescriptor.from_tensor(out, [c.BM, c.BN]), m, n, k, dummy, 0, 10**9,
                             dummy.view(torch.int32), dummy, 0, BM=c.BM, BN=c.BN, BK=c.BK, GROUP_M=c.GROUP_M,
                             NUM_PROGRAMS=programs, WAIT=False, FLATTEN=c.flatten, num_warps=c.num_warps,
                             num_stages=c.num_stages)
    return out


if __name__ == "__main__":
    main()
