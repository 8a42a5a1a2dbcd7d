"""The MoE EFA speedup over the paper's baseline under other routing draws (docs/results/2026-12-05-moe-efa-peak.md).

    python docs/results/data/moe-efa-peak-2026-12-05/seeds.py OFFSET [OFFSET ...]

Each of the paper check's MoE points (paper-efa-2x8, multinomial, reference kernels) rerun with routing_seed T + OFFSET
(the check uses T): fused and paper-baseline times, the draw's largest pair and busiest rank against their means.
"""
from __future__ import annotations

import sys

import numpy as np

from mkernel.routing import routing_for
from mkernel.studies import paper_check, sweep

SIZES = (8192, 16384, 32768, 65536, 131072)


def main(offsets: list[int]) -> None:
    figs, _ = paper_check.load()
    pts = {p.size: p for p in paper_check.points(figs, pairs={("moe_dispatch_gemm", "paper-efa-2x8")})}
    print("| T | seed | largest pair / mean | busiest rank / mean | fused us | paper baseline us | speedup |")
    print("|---|---|---|---|---|---|---|")
    for off in offsets:
        for size in SIZES:
            p = pts[size]
            shape = tuple((k, v + off) if k == "routing_seed" else (k, v) for k, v in p.shape)
            q = sweep.Point(p.testbed, p.kernel, p.size, shape, p.options)
            sc = sweep.scenario_of(q)
            c = sc.cluster
            r = routing_for(sc.workload, c.nodes, c.gpus_per_node)
            pairs = np.stack([r.pairs_to(s) for s in range(c.world)])
            rows = np.array([r.rows(d) for d in range(c.world)])
            row = sweep.run_point(q)
            print(f"| {size} | T+{off} | {pairs.max() / pairs.mean():.2f} | {rows.max() / rows.mean():.2f} | "
                  f"{row['fused_us']:.0f} | {row['paper_baseline_us']:.0f} | {row['paper_speedup']:.2f} |", flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]])
