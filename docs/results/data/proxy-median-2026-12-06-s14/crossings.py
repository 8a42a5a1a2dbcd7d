"""The plain scale-out points (rail and 2:1 clusters, no options) whose speedup crosses 1.0 between two runs, and
the proxy counters of the largest fused movers.  python THIS OLD/results.jsonl NEW/results.jsonl [N movers]"""
import json
import sys


def rows(path: str) -> dict[str, dict]:
    return {r["key"]: r for r in map(json.loads, open(path))}


old, new = rows(sys.argv[1]), rows(sys.argv[2])
for k in sorted(new):
    a, b = old[k], new[k]
    if b["options"] not in ("", "kernels=reference") or "gb200" in b["testbed"] or b.get("speedup") is None:
        continue
    if (a["speedup"] < 1) != (b["speedup"] < 1):
        print(f"crosses: {k:60s} {a['speedup']:.4f}x -> {b['speedup']:.4f}x")
top = int(sys.argv[3]) if len(sys.argv) > 3 else 8
moved = sorted((k for k in new if old[k].get("fused_us") and new[k].get("fused_us")),
               key=lambda k: -abs(new[k]["fused_us"] / old[k]["fused_us"] - 1))[:top]
for k in moved:
    a, b = old[k], new[k]
    print(f"{k:60s} {a['fused_us']:8.1f} -> {b['fused_us']:8.1f} us; commands {a['commands']} -> {b['commands']},"
          f" batches {a['batches']} -> {b['batches']}, proxy busy {a['proxy_busy_us']:.1f} -> {b['proxy_busy_us']:.1f},"
          f" exposed comm {a['exposed_comm_us']:.1f} -> {b['exposed_comm_us']:.1f} us")
