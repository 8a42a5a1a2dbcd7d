"""GEMM+AR on paper-efa-2x8: our fused time against the reference code's own EFA targets
(uccl-project/mKernel bench/gemm_ar_bench.py docstring: "Targets at M in {2048, 4096, 8192, 16384, 32768}:
[0.418, 0.350, 0.868, 2.755, 10.896] ms"), and the speedup each gives over our NCCL baseline.
Reads a paper-check results.jsonl (argument). Run from the repository root."""
import json
import sys

REFERENCE_US = {2048: 418, 4096: 350, 8192: 868, 16384: 2755, 32768: 10896}
rows = [json.loads(line) for line in open(sys.argv[1])]
for r in rows:
    if r["testbed"] == "paper-efa-2x8" and r["kernel"] == "gemm_ar":
        m, f, b = r["size"], r["fused_us"], r["paper_baseline_us"]
        ref = REFERENCE_US[m]
        print(f"M={m:6d}: fused {f:7.0f} us, reference code {ref:6d} us ({ref / f:.2f}x ours); baseline {b:7.0f} us; "
              f"speedup {b / f:.2f}x, with the reference's fused time {b / ref:.2f}x")
