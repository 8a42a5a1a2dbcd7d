"""Where the fused MoE time goes on paper-efa-2x8 (reference profile), per grid size, against the
reference code's published fused times (docs/results/2026-12-05-moe-paper.md, item 2).

    python docs/results/data/moe-paper-2026-12-05/breakdown.py ROUTING [SIZE ...]

ROUTING: ``shifted`` (the check's routing until 2026-12-05) or ``multinomial`` (the bench's, seeded
per size as the paper check seeds it). Per size, one traced run of the fused op (every node), read on
its slowest rank:
- puts: when the proxy posted the rank's last put to the other node, and the network floor (its
  network bytes over its NICs);
- intra: the dispatch's gathers (own tokens to the node, then the rail peer's fan-out): tasks, their
  busy time over the intra SMs, and their fixed per-task part (``fused_peer_task_us`` + NVLink
  latency per task, the step round trips excluded);
- GEMM: the tiles' busy time over the compute SMs (the waves if packed perfectly), first and last tile;
- tail: the slowest rank's end less its last dispatch block (GEMM after the last rows landed);
then the same point untraced with the fused kernel's communication-task costs zeroed
(``fused_peer_task_us``, ``fused_peer_step_us``, ``fused_local_step_us``): the per-task term.
"""
from __future__ import annotations

import sys

from mkernel.builders import moe_dispatch_gemm as moe
from mkernel.ir import Role
from mkernel.runner import run
from mkernel.studies import sweep

PUBLISHED_US = {8192: 631, 16384: 1057, 32768: 1538, 65536: 2669, 131072: 5160}  # bench/dispatch_gemm_bench.py
FREE = (("gpu.fused_peer_task_us", 0.0), ("gpu.fused_peer_step_us", 0.0), ("gpu.fused_local_step_us", 0.0))


def point(size: int, routing: str, extra: tuple = ()) -> sweep.Point:
    seed = (("routing_seed", size),) if routing == "multinomial" else ()
    return sweep.Point("paper-efa-2x8", "moe_dispatch_gemm", size,
                       (("m", size), ("n", 2048), ("k", 7168), ("routing", routing)) + seed,
                       (("kernels", "reference"),) + extra)


def main(routing: str, sizes: list[int]) -> None:
    print("| size | fused us (published) | paper baseline us | last put posted / network floor us | intra: tasks, busy/SMs us, "
          "fixed per-task us/SMs | GEMM: busy/SMs us, first-last tile us | tail us | per-task costs zeroed: fused us |")
    print("|---|---|---|---|---|---|---|---|")
    for size in sizes:
        sc = sweep.scenario_of(point(size, routing))
        res, st = run(sc, backend="sim", trace=True, hazards=False)
        c = sc.cluster.for_variant("fused")
        slow = max(range(len(st.per_rank_s)), key=lambda r: st.per_rank_s[r])
        spans = [s for s in st.spans if s[0] == slow]
        roles = moe._roles(sc.workload, c)
        intra = [s for s in spans if s[1] == "intra"]
        gemm = [s for s in spans if s[1] == "compute" and s[3].startswith("expert")]
        posts = [s for s in spans if s[1] == "proxy"]  # the proxy posting the rank's puts to the NIC
        fixed = len(intra) * (c.gpu.fused_peer_task_us + c.nvlink.latency_us)
        end = st.per_rank_s[slow] * 1e6
        net = res["bytes_per_gpu"].get("network", 0.0) / (c.nic.gb_per_s * 1e3)
        free = sweep.run_point(point(size, routing, FREE))
        n_intra, n_comp = roles[Role.INTRA], roles[Role.COMPUTE]
        print(f"| {size} | {res['time_s'] * 1e6:.0f} ({PUBLISHED_US[size]}) | {res['paper_baseline']['time_s'] * 1e6:.0f} | "
              f"{max((s[5] for s in posts), default=0):.0f} / {net:.0f} | {len(intra)}, "
              f"{sum(s[5] - s[4] for s in intra) / n_intra:.0f}, {fixed / n_intra:.0f} | "
              f"{sum(s[5] - s[4] for s in gemm) / n_comp:.0f}, {min(s[4] for s in gemm):.0f}-{max(s[5] for s in gemm):.0f} | "
              f"{end - max(s[5] for s in intra):.0f} | {free['fused_us']:.0f} |")


if __name__ == "__main__":
    main(sys.argv[1], [int(a) for a in sys.argv[2:]] or sorted(PUBLISHED_US))
