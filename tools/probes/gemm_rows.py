"""Where the fused GEMM table loses to the standalone persistent GEMM, and pointer loads for misaligned rows.

Issue 26, item 2. On 2026-12-04 (call23) the standalone flattened 128 x 256 GEMM reached 0.99-1.01 of
torch.matmul at K = 512 where the fused kernel's GEMM table runs 0.92-0.94 (2026-12-02), and the shapes
no tile divides lost 7-17% only because their rows do not start on 128-byte lines (padded, the
same shapes ran 0.94-1.02). Two questions:

1. **The table's cost per tile.** ``mkernel.gemm_ar(mode="fused")`` at world 1 with the table loop
   (tiles._gemm_rows) replaced by a variant, one process each: ``table`` (as committed), ``prefetch``
   (the next row's fields loaded one tile ahead), ``nosignal`` (no per-tile signal code: the block's
   whole count bumped once after the loop; exact at world 1, where every tile bumps one flag; a
   measurement, not a candidate) and ``arith`` (world 1 only: coordinates from the tile index, no row
   loaded per tile, in place of the row loop).
2. **Misaligned rows without TMA.** The standalone kernel with A and B loaded through pointers
   (cp.async, 16-byte vectors) instead of TMA, on the odd shapes as given and padded.

    python3 tools/probes/gemm_rows.py --variant table|prefetch|nosignal|arith --out rows_table.json
    python3 tools/probes/gemm_rows.py --pointers --out ptr.json
"""
from __future__ import annotations

import argparse
import json

import torch
import triton
import triton.language as tl
from triton.testing import do_bench_cudagraph

from mkernel.hw.kernels import tiles
from mkernel.hw.kernels.sync import _bulk_writes_done, _bar_sync, _bump_masked, _release_stores_if

GW = tl.constexpr(tiles.GW)
G_A_ROW0, G_B_COL0, G_C_ROW0, G_C_COL0, G_SIG_RANK, G_SIG_SLOT = (tiles.G_A_ROW0, tiles.G_B_COL0, tiles.G_C_ROW0,
                                                                  tiles.G_C_COL0, tiles.G_SIG_RANK, tiles.G_SIG_SLOT)
SHAPES = [(4096, 4096, 512), (8192, 8192, 512), (16384, 16384, 512), (8192, 8192, 2048), (5120, 3072, 7040)]
ODD = [(5000, 3000, 7000), (3000, 5000, 1000), (12000, 9000, 2056)]


@triton.jit
def _rows_prefetch(gemm_tiles, start, end, nb, a_desc, b_desc, c_desc, k0, k_cols, flag_bases, rank,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pend_rank = rank - rank - 1
    pend_slot = rank - rank
    pend_n = rank - rank
    row = gemm_tiles + start * GW
    n_a, n_b = tl.load(row + G_A_ROW0).to(tl.int32), tl.load(row + G_B_COL0).to(tl.int32)
    n_cr, n_cc = tl.load(row + G_C_ROW0).to(tl.int32), tl.load(row + G_C_COL0).to(tl.int32)
    n_sr, n_ss = tl.load(row + G_SIG_RANK).to(tl.int32), tl.load(row + G_SIG_SLOT).to(tl.int32)
    for g in tl.range(start, end, nb, flatten=True):
        a_r0, b_c0, c_r0, c_c0, sig_rank, sig_slot = n_a, n_b, n_cr, n_cc, n_sr, n_ss
        nxt = gemm_tiles + tl.minimum(g + nb, end - 1) * GW  # the next tile's row, read under this tile's products
        n_a, n_b = tl.load(nxt + G_A_ROW0).to(tl.int32), tl.load(nxt + G_B_COL0).to(tl.int32)
        n_cr, n_cc = tl.load(nxt + G_C_ROW0).to(tl.int32), tl.load(nxt + G_C_COL0).to(tl.int32)
        n_sr, n_ss = tl.load(nxt + G_SIG_RANK).to(tl.int32), tl.load(nxt + G_SIG_SLOT).to(tl.int32)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kt in range(tl.cdiv(k_cols, BK)):
            kk = k0 + kt * BK
            acc = tl.dot(a_desc.load([a_r0, kk]), b_desc.load([kk, b_c0]), acc)
        new_run = (sig_rank != pend_rank) | (sig_slot != pend_slot)
        send = new_run & (pend_rank >= 0)
        _release_stores_if(send)
        _bump_masked(flag_bases, tl.where(send, pend_rank, -1), pend_slot, rank, pend_n.to(tl.int64))
        c_desc.store([c_r0, c_c0], acc.to(tl.bfloat16))
        pend_n = tl.where(new_run, 1, pend_n + 1)
        pend_rank = tl.where(new_run, sig_rank, pend_rank)
        pend_slot = tl.where(new_run, sig_slot, pend_slot)
    _bulk_writes_done()
    _bar_sync()
    _bump_masked(flag_bases, pend_rank, pend_slot, rank, pend_n.to(tl.int64))


@triton.jit
def _rows_nosignal(gemm_tiles, start, end, nb, a_desc, b_desc, c_desc, k0, k_cols, flag_bases, rank,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    n = rank - rank
    for g in tl.range(start, end, nb, flatten=True):
        row = gemm_tiles + g * GW
        a_r0 = tl.load(row + G_A_ROW0).to(tl.int32)
        b_c0 = tl.load(row + G_B_COL0).to(tl.int32)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kt in range(tl.cdiv(k_cols, BK)):
            kk = k0 + kt * BK
            acc = tl.dot(a_desc.load([a_r0, kk]), b_desc.load([kk, b_c0]), acc)
        c_desc.store([tl.load(row + G_C_ROW0).to(tl.int32), tl.load(row + G_C_COL0).to(tl.int32)], acc.to(tl.bfloat16))
        n += 1
    last = gemm_tiles + (end - 1) * GW
    _bulk_writes_done()
    _bar_sync()
    _bump_masked(flag_bases, tl.where(n > 0, tl.load(last + G_SIG_RANK).to(tl.int32), -1),
                 tl.load(last + G_SIG_SLOT).to(tl.int32), rank, n.to(tl.int64))


@triton.jit
def _rows_arith(gemm_tiles, start, end, nb, a_desc, b_desc, c_desc, k0, k_cols, flag_bases, rank,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """World 1's gemm_ar only (one segment from row 0, the whole C in the grouped order): each tile's
    coordinates from its index, as the standalone GEMM computes them, no row loaded per tile, one
    signal after the loop. The grid size is the last row's tile (the grouped order ends on the last
    row and column tile). In place of the row loop, not beside it: call26's grid segments branched
    between two loops and lost the pipelining; this tells the row loads' cost from the branch's."""
    last = gemm_tiles + (end - 1) * GW
    tiles_m = (tl.load(last + G_C_ROW0) // BM + 1).to(tl.int32)
    tiles_n = (tl.load(last + G_C_COL0) // BN + 1).to(tl.int32)
    per_group = 8 * tiles_n
    n = rank - rank
    for g in tl.range(start, end, nb, flatten=True):
        first_m = (g // per_group) * 8
        group_m = tl.minimum(tiles_m - first_m, 8)
        c_r0 = (first_m + g % group_m) * BM
        c_c0 = ((g % per_group) // group_m) * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kt in range(tl.cdiv(k_cols, BK)):
            kk = k0 + kt * BK
            acc = tl.dot(a_desc.load([c_r0, kk]), b_desc.load([kk, c_c0]), acc)
        c_desc.store([c_r0, c_c0], acc.to(tl.bfloat16))
        n += 1
    _bulk_writes_done()
    _bar_sync()
    _bump_masked(flag_bases, tl.where(n > 0, tl.load(last + G_SIG_RANK).to(tl.int32), -1),
                 tl.load(last + G_SIG_SLOT).to(tl.int32), rank, n.to(tl.int64))


VARIANTS = {"table": None, "prefetch": _rows_prefetch, "nosignal": _rows_nosignal, "arith": _rows_arith}


@triton.jit
def ptr_gemm(a_ptr, b_ptr, c_ptr, M, N, K, lda, ldb, ldc, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
             GROUP_M: tl.constexpr, NP: tl.constexpr):
    """The standalone persistent GEMM with A and B through pointers (cp.async) instead of TMA."""
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    per_group = GROUP_M * tiles_n
    lda = tl.multiple_of(lda, 8)
    ldb = tl.multiple_of(ldb, 8)
    ldc = tl.multiple_of(ldc, 8)
    for tile in tl.range(pid, tiles_m * tiles_n, NP, flatten=True):
        first_m = (tile // per_group) * GROUP_M
        group_m = tl.minimum(tiles_m - first_m, GROUP_M)
        tm = first_m + (tile % group_m)
        tn = (tile % per_group) // group_m
        rm = tm * BM + tl.arange(0, BM)
        rn = tn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kt in range(tl.cdiv(K, BK)):
            ks = kt * BK + rk
            a = tl.load(a_ptr + rm[:, None].to(tl.int64) * lda + ks[None, :], mask=(rm[:, None] < M) & (ks[None, :] < K),
                        other=0.0)
            b = tl.load(b_ptr + ks[:, None].to(tl.int64) * ldb + rn[None, :], mask=(ks[:, None] < K) & (rn[None, :] < N),
                        other=0.0)
            acc = tl.dot(a, b, acc)
        tl.store(c_ptr + rm[:, None].to(tl.int64) * ldc + rn[None, :], acc.to(tl.bfloat16),
                 mask=(rm[:, None] < M) & (rn[None, :] < N))


def _rel(out, ref) -> float:
    return float((out.double() - ref).norm() / ref.norm())


def fused_rows(variant: str) -> list[dict]:
    import mkernel

    if VARIANTS[variant] is not None:
        tiles._gemm_rows = VARIANTS[variant]  # before the first compile: the table loop calls it by name
    rows = []
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) * k ** -0.5
        errs = []
        for _ in range(2):
            a.copy_(torch.randn_like(a))
            b.copy_(torch.randn_like(b) * k ** -0.5)
            out = mkernel.gemm_ar(a, b, mode="fused")
            torch.cuda.synchronize()
            errs.append(_rel(out, a.double() @ b.double()))
        us = do_bench_cudagraph(lambda: mkernel.gemm_ar(a, b, mode="fused"), rep=100) * 1e3
        t_us = do_bench_cudagraph(lambda: a @ b, rep=100) * 1e3
        rows.append({"variant": variant, "m": m, "n": n, "k": k, "us": us, "torch_us": t_us, "ratio": t_us / us,
                     "rel_err": max(errs)})
        print(f"{variant:9s} {m:5d}x{n:5d}x{k:5d} fused {us:8.1f} us torch {t_us:8.1f} ratio {t_us / us:.3f} "
              f"err {max(errs):.1e}", flush=True)
        mkernel.close()
    return rows


def pointers() -> list[dict]:
    from mkernel.hw.kernels.gemm import Config, gemm

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for m, n, k in ODD:
        for pad in (False, True):
            def make(r, c, scale=1.0):
                ld = -(-c // 64) * 64 if pad else c
                return (torch.randn(r, ld, device="cuda", dtype=torch.bfloat16) * scale)[:, :c]
            a, b, out = make(m, k), make(k, n, k ** -0.5), make(m, n)
            ref = a.double() @ b.double()
            programs = min(sms, triton.cdiv(m, 128) * triton.cdiv(n, 256))

            def ptr():
                ptr_gemm[(programs,)](a, b, out, m, n, k, a.stride(0), b.stride(0), out.stride(0), BM=128, BN=256,
                                      BK=64, GROUP_M=8, NP=programs, num_warps=8, num_stages=3)
            out.fill_(float("nan"))
            ptr()
            torch.cuda.synchronize()
            err = _rel(out, ref)
            us = do_bench_cudagraph(ptr, rep=100) * 1e3
            t_us = do_bench_cudagraph(lambda: a @ b, rep=100) * 1e3
            tma = None
            if not pad:
                tma = do_bench_cudagraph(lambda: gemm(a, b, config=Config(flatten=True)), rep=100) * 1e3
            rows.append({"m": m, "n": n, "k": k, "padded": pad, "ptr_us": us, "tma_us": tma, "torch_us": t_us,
                         "ratio": t_us / us, "rel_err": err})
            print(f"ptr {'pad' if pad else 'odd'} {m:5d}x{n:5d}x{k:5d} {us:8.1f} us (tma {tma or 0:8.1f}) torch "
                  f"{t_us:8.1f} ratio {t_us / us:.3f} err {err:.1e}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", choices=sorted(VARIANTS))
    ap.add_argument("--pointers", action="store_true")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import torch.distributed as dist

    from mkernel.hw.runtime import safety

    safety.apply_rendezvous("bench_api")  # a tool of the same kind: one world-1 group
    dist.init_process_group("gloo", rank=0, world_size=1)  # the fused path's symmetric memory needs a group
    rows = pointers() if args.pointers else fused_rows(args.variant)
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
