"""Per tag of sitting files (sitting.sh's "round tag user sys wall" lines): runs, least, median and most of user +
sys, and the median of sys. usage: python summary.py FILE..."""
import statistics, sys

for path in sys.argv[1:]:
    runs: dict[str, list[tuple[float, float]]] = {}
    for line in open(path):
        parts = line.split()
        if len(parts) == 5 and parts[0].isdigit():
            runs.setdefault(parts[1], []).append((float(parts[2]) + float(parts[3]), float(parts[3])))
    print(path)
    for tag, xs in runs.items():
        cpu = sorted(c for c, _ in xs)
        print(f"  {tag:5} n={len(cpu)} CPU least {cpu[0]:.2f} median {statistics.median(cpu):.2f} most {cpu[-1]:.2f} s"
              f"  (sys median {statistics.median(s for _, s in xs):.2f} s)")
