"""AllGather+GEMM beyond two nodes: direct sends against ring forwarding, with the baseline, in the sim.

    python tools/studies/compare_ag_forward.py [--nodes 2 4 8] [--sizes 8192 16384]

Prints one row per (nodes, M): fused time with forward = direct and = ring, and the unfused
baseline, on paper-ib-2x8 with more nodes (N_local = M / world, K = M), node-symmetric collapse.
"""
from __future__ import annotations

import argparse
import dataclasses

from mkernel import Workload, load_scenario
from mkernel.builders import ag_gemm
from mkernel.sim import SimBackend


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="*", default=[2, 4, 8])
    ap.add_argument("--sizes", type=int, nargs="*", default=[8192, 16384])
    args = ap.parse_args()
    base = load_scenario("paper-ib-2x8")
    print("| nodes | M | direct us | ring us | baseline us |\n|---|---|---|---|---|")
    for nodes in args.nodes:
        c = dataclasses.replace(base.cluster, nodes=nodes)
        for m in args.sizes:
            w = Workload(kernel="ag_gemm", m=m, n=m // c.world, k=m)
            times = [SimBackend().run(ag_gemm.build(dataclasses.replace(w, internode=f), c), c, collapse=True).time_s
                     for f in ("direct", "ring")]
            baseline = SimBackend().run(ag_gemm.build_baseline(w, c), c, collapse=True).time_s
            print(f"| {nodes} | {m} | {times[0] * 1e6:.1f} | {times[1] * 1e6:.1f} | {baseline * 1e6:.1f} |")


if __name__ == "__main__":
    main()
