"""What-if: the paper's MoE baseline under the reference bench's multinomial routing instead of the
grid's uniform one (docs/results/2026-12-05-paper-check.md, lead 2).

    python docs/results/data/paper-check-2026-12-05/moe_routing_whatif.py [TESTBED]

The reference code's bench (uccl-project/mKernel bench/dispatch_gemm_bench.py) draws expert weights
uniform in [0, 1) and each token's 8 distinct experts in proportion to them. This script draws that
(numpy, Gumbel top-k, seeds 0-2; not torch's generator, so not the bench's exact draw) and times the
paper's baseline as mkernel does (mkernel.builders.moe_dispatch_gemm.build_paper_baseline: NCCL's
alltoall of world x pad rows, pad the largest (source, destination) pair's count of (token, expert)
rows, then one dense GEMM over them; sim/library.py's call models), next to the grid's routing.
Nothing is simulated; the fused op is not re-timed (under this routing its busiest GPU works more too).
"""
from __future__ import annotations

import sys

import numpy as np

from mkernel import nccl
from mkernel.routing import routing_for
from mkernel.sim.library import gemm_call_us
from mkernel.studies import sweep

SIZES = (8192, 16384, 32768, 65536, 131072)


def multinomial_pad(tokens: int, world: int, experts: int, topk: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    weights = rng.random(experts)
    keys = np.log(weights)[None, :] - np.log(-np.log(rng.random((tokens, experts))))  # Gumbel top-k
    chosen = np.argpartition(-keys, topk, axis=1)[:, :topk]
    dest = chosen // (experts // world)
    src = np.repeat(np.arange(world), tokens // world)
    pairs = np.zeros((world, world), dtype=np.int64)
    np.add.at(pairs, (np.repeat(src, topk), dest.ravel()), 1)
    return int(pairs.max())


def main(testbed: str = "paper-efa-2x8") -> None:
    print(f"| {testbed} tokens | uniform: pad, baseline us | multinomial (3 seeds): pad, baseline us | ratio |")
    print("|---|---|---|---|")
    for t in SIZES:
        p = sweep.Point(testbed, "moe_dispatch_gemm", t, (("m", t), ("n", 2048), ("k", 7168), ("routing", "shifted")),
                        (("kernels", "reference"),))
        sc = sweep.scenario_of(p)
        w, c = sc.workload, sc.cluster
        base = c.for_variant("nccl_even_a2a+dense_gemm")

        def time_us(pad: int) -> float:
            a2a = nccl.estimate("alltoall", c.world * pad * w.k * 2, nccl.fabric_of(base)).time_us
            return a2a + gemm_call_us(c.world * pad, w.n, w.k, base)

        routing = routing_for(w, c.nodes, c.gpus_per_node)
        uniform = max(int(routing.pairs_to(r).max()) for r in range(c.world))
        pads = [multinomial_pad(t, c.world, w.experts, w.topk, seed) for seed in range(3)]
        times = [time_us(pad) for pad in pads]
        print(f"| {t} | {uniform}, {time_us(uniform):.0f} | {min(pads)}-{max(pads)}, {min(times):.0f}-{max(times):.0f} | "
              f"{min(times) / time_us(uniform):.2f}-{max(times) / time_us(uniform):.2f}x |")


if __name__ == "__main__":
    main(*sys.argv[1:])
