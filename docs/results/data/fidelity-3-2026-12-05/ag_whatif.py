"""AG+GEMM on paper-efa-2x8: the baseline's all_gather re-timed with other EFA Simple hop latencies (a sensitivity,
not applied: the fused time and the GEMM held at the grid's)."""
import json
from mkernel import nccl
from mkernel.scenario import load_scenario
f = nccl.fabric_of(load_scenario("paper-efa-2x8").cluster)
rows = [json.loads(l) for l in open("docs/results/grid-2026-12-05-merged/results.jsonl")]
rows = [r for r in rows if r["testbed"] == "paper-efa-2x8" and r["kernel"] == "ag_gemm"]
hops = [40.6, 30.0, 20.0, 10.0, 0.0]
print("| M | fused us | " + " | ".join(f"net_hop_us {h:g} (Simple hop {14 + 2*h:.0f} us)" for h in hops) + " |")
for r in sorted(rows, key=lambda r: r["size"]):
    nbytes = 2 * r["m"] * r["k"]
    gemm = r["baseline_us"] - nccl.estimate("all_gather", nbytes, f).time_us
    cells = []
    for h in hops:
        e = nccl.estimate("all_gather", nbytes, nccl.with_terms(f, net_hop_us=h))
        cells.append(f"{(gemm + e.time_us) / r['fused_us']:.2f}x ({e.time_us:.0f} us, {e.proto})")
    print(f"| {r['size']} | {r['fused_us']:.0f} | " + " | ".join(cells) + " |")
