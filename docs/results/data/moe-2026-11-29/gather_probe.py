"""Why the fused MoE dispatch is slow (issue 6): row gathers written three ways, timed on this GPU.

Each of ``blocks`` programs walks tasks of 16 rows x ``cols`` bf16 columns, as the fused kernel's
intra blocks do (CR x CC tiles). Variants:
- ``int64``: the kernel's way: the row index is an int64 loaded from the task table, times the row
  stride (``tiles._gather``);
- ``int32``: the row offset computed in int32 and declared a multiple of 8 elements;
- ``copy``: contiguous rows (no index), the floor for this loop shape.
Prints GB/s (bytes read + written) per variant and block count. Arguments: the modes to run
(0 int64, 1 int32, 2 copy; default all), one process per mode keeps a fault from hiding the rest.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def gather_kernel(src, dst, idx, n_rows, n_src, ld, MODE: tl.constexpr, CR: tl.constexpr, CC: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    ld = tl.multiple_of(ld.to(tl.int32), 8)
    tiles_c = tl.cdiv(ld, CC)
    for task in range(pid, tl.cdiv(n_rows, CR), nprog):
        for t in range(tiles_c):
            rr = task * CR + tl.arange(0, CR)
            cc = t * CC + tl.arange(0, CC)
            cc = tl.max_contiguous(tl.multiple_of(cc, 8), 8)
            m = (rr[:, None] < n_rows) & (cc[None, :] < ld)
            if MODE == 0:
                pick = tl.load(idx + rr, mask=rr < n_rows, other=0)  # int64
                x = tl.load(src + pick[:, None] * ld + cc[None, :], mask=m)
            elif MODE == 1:
                pick = tl.load(idx + rr, mask=rr < n_rows, other=0).to(tl.int32)
                off = tl.multiple_of(pick * ld, 8)
                x = tl.load(src + off[:, None].to(tl.int64) + cc[None, :], mask=m)
            else:
                x = tl.load(src + (rr[:, None] % n_src).to(tl.int64) * ld + cc[None, :], mask=m)  # contiguous
            tl.store(dst + rr[:, None].to(tl.int64) * ld + cc[None, :], x, mask=m)


def main() -> None:
    import sys

    modes = [int(a) for a in sys.argv[1:]] or [2, 1, 0]
    tokens, rows, cols = 8192, 65536, 7168
    src = torch.randn(tokens, cols, device="cuda").bfloat16()
    idx = torch.randint(0, tokens, (rows,), device="cuda", dtype=torch.int64)
    dst = torch.empty(rows, cols, device="cuda", dtype=torch.bfloat16)
    nbytes = 2 * rows * cols * 2
    print(f"{'variant':<8} {'blocks':>6} {'us':>9} {'GB/s':>8} {'ok':>4}")
    for mode, name in ((m, ("int64", "int32", "copy")[m]) for m in modes):
        for blocks in (16, 132):
            fn = lambda: gather_kernel[(blocks,)](src, dst, idx, rows, tokens, cols, MODE=mode, CR=16, CC=256, num_warps=8)
            fn()
            torch.cuda.synchronize()
            ok = torch.equal(dst, src[idx] if mode < 2 else src.repeat(rows // tokens, 1))
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(5):
                fn()
            end.record()
            end.synchronize()
            us = start.elapsed_time(end) * 1e3 / 5
            print(f"{name:<8} {blocks:>6} {us:>9.0f} {nbytes / us / 1e3:>8.1f} {str(ok):>4}", flush=True)
    torch.index_select(src, 0, idx, out=dst)  # warm-up, as the variants had
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        torch.index_select(src, 0, idx, out=dst)
    end.record()
    end.synchronize()
    us = start.elapsed_time(end) * 1e3 / 5
    print(f"{'torch':<8} {'-':>6} {us:>9.0f} {nbytes / us / 1e3:>8.1f}")


if __name__ == "__main__":
    main()
