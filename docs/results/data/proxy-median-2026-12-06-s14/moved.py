"""Two runs of one grid compared: per time field, how many points moved (relative change > 1e-6), the range of the
moves, and the largest movers.  python THIS OLD/results.jsonl NEW/results.jsonl [N largest, default 8]"""
import json
import sys


def rows(path: str) -> dict[str, dict]:
    return {r["key"]: r for r in map(json.loads, open(path))}


old, new = rows(sys.argv[1]), rows(sys.argv[2])
top = int(sys.argv[3]) if len(sys.argv) > 3 else 8
assert old.keys() == new.keys(), "the two runs hold different points"
for field in ("fused_us", "baseline_us"):
    moves = sorted(((new[k][field] / old[k][field] - 1, k) for k in new
                    if old[k].get(field) and new[k].get(field) and abs(new[k][field] / old[k][field] - 1) > 1e-6),
                   key=lambda m: -abs(m[0]))
    if not moves:
        print(f"{field}: 0 of {len(new)} moved"); continue
    changes = sorted(abs(c) for c, _ in moves)
    print(f"{field}: {len(moves)} of {len(new)} moved, {min(c for c, _ in moves):+.2%} .. {max(c for c, _ in moves):+.2%},"
          f" median |change| of the moved {changes[len(changes) // 2]:.2%}, over 1%: {sum(c > 0.01 for c in changes)},"
          f" over 5%: {sum(c > 0.05 for c in changes)}")
    for c, k in moves[:top]:
        print(f"  {k:70s} {old[k][field]:10.1f} -> {new[k][field]:10.1f} us ({c:+.2%})")
