"""The least of each phase over runs of phases.py (phases-runs/ph-TAG-N.txt: each run's output), FINAL and BASE
side by side, and the simulated runs' time: the backend's runs less the model's set-up (with the tracker's) and the
tracker's end. usage: phases_min.py FOLDER"""
import sys
from pathlib import Path

least: dict[str, dict[str, float]] = {}
for f in sorted(Path(sys.argv[1]).glob("ph-*-*.txt")):
    tag = f.name.split("-")[1]
    for line in f.read_text().splitlines():
        parts = line.split()
        if parts:
            least.setdefault(parts[0], {})[tag] = min(least.get(parts[0], {}).get(tag, 9e9), float(parts[-1]))
print(f"{'phase (process_time s, least of the runs)':50s} {'base':>8s} {'final':>8s}")
for name, d in least.items():
    if max(d.values()) >= 0.005:
        print(f"{name:50s} {d['base']:8.3f} {d['final']:8.3f}")
runs = {t: least["SimBackend.run"][t] - least["mkernel.sim.backend.Model"][t] - least["LoggedTracker.finish"][t]
        for t in ("base", "final")}
print(f"{'simulated runs (backend runs less Model set-up, tracker end)':50s} {runs['base']:8.3f} {runs['final']:8.3f}")
