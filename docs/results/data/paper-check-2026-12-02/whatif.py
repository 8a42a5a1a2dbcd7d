# Run as: python docs/results/data/paper-check-2026-12-02/whatif.py OUT (run at commit e1ff59f, where the imports were from mkernel)
"""What-ifs for the paper check's misses: each point with the reference profile, then with the fused
kernel's communication-task costs zeroed, then with a per-call host cost (the paper's host sync)."""
import sys
from pathlib import Path
from mkernel.studies import paper_check, sweep
figs, _ = paper_check.load()
base = paper_check.points(figs)
want = {("moe_dispatch_gemm", "paper-efa-2x8", 8192), ("moe_dispatch_gemm", "paper-efa-2x8", 32768),
        ("ring_attention", "paper-efa-2x8", 768), ("ring_attention", "paper-ib-2x8", 768),
        ("ring_attention", "paper-efa-2x8", 3072),
        ("gemm_ar", "paper-ib-2x8", 4096), ("gemm_ar", "paper-ib-2x8", 8192), ("gemm_ar", "paper-efa-2x8", 4096),
        ("gemm_rs", "paper-ib-2x8", 2048), ("gemm_rs", "paper-ib-2x8", 8192), ("gemm_rs", "paper-ib-2x8", 16384),
        ("gemm_rs", "paper-efa-2x8", 2048), ("gemm_rs", "paper-efa-2x8", 8192), ("gemm_rs", "paper-efa-2x8", 16384)}
free = (("gpu.fused_peer_task_us", 0.0), ("gpu.fused_peer_step_us", 0.0), ("gpu.fused_local_step_us", 0.0))
pts = []
for p in base:
    if (p.kernel, p.testbed, p.size) in want:
        if p.kernel == "gemm_rs":
            pts.append(sweep.Point(p.testbed, p.kernel, p.size, p.shape, p.options + (("gpu.fused_call_us", 40.0),)))
        else:
            pts.append(sweep.Point(p.testbed, p.kernel, p.size, p.shape, p.options + free))
sweep.run_grid(pts, Path(sys.argv[1]), workers=2)
