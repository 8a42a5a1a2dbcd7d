"""Run scale-out points with every incremental re-rate checked against a from-scratch max-min of the
changed links' whole component: prints the largest relative gap over every flow's rate, and how
many re-rates had any gap at all (rounding: the same sums in another order)."""
import sys
import mkernel.sim.flows as F
import mkernel.sim.maxmin as M
from mkernel.studies import study, sweep

grid = {p.key: p for p in study.grid()}
stats = {"solves": 0, "incremental": 0, "gapped": 0, "worst": 0.0}
orig = M.resolve


def checked(links, touched, prune=True):
    full = M.component(links)
    moved, rates = orig(links, touched, prune)
    stats["solves"] += 1
    if prune:
        stats["incremental"] += 1
        want = M.max_min(full)
        gap = max((abs(rates.get(f, f.rate) - want[f]) / want[f] for f in full if want[f] > 0), default=0.0)
        stats["gapped"] += gap > 0
        stats["worst"] = max(stats["worst"], gap)
    return moved, rates


F.resolve = checked
for key in sys.argv[1:]:
    stats.update(solves=0, incremental=0, gapped=0, worst=0.0)
    row = sweep.run_point(grid[key])
    print(key, f"fused {row['fused_us']!r} us:", stats, flush=True)
