"""Medians of measure.sh's rounds, per phase and knob setting: `python summarize.py DIR`."""
import json
import statistics
import sys
from pathlib import Path

d = Path(sys.argv[1])
knobs = [k for k in ("off", "on", "every", "every8", "chunk") if (d / f"phases-{k}-1.txt").exists()]
runs = {k: [json.loads(p.read_text().splitlines()[0]) for p in sorted(d.glob(f"phases-{k}-*.txt"))] for k in knobs}
rows = {k: [json.loads(p.read_text()) for p in sorted(d.glob(f"row-{k}-*.json"))] for k in knobs}
print("phase | " + " | ".join(f"{k} (rounds; median)" for k in knobs))
for phase in runs[knobs[0]][0]:
    cells = [f"{', '.join(f'{r[phase]:.2f}' for r in runs[k])}; **{statistics.median(r[phase] for r in runs[k]):.2f}**"
             for k in knobs]
    print(f"{phase} | " + " | ".join(cells))
for k in knobs:
    print(k, "fused us", {repr(r["time_s"] * 1e6) for r in rows[k]}, "events", {r.get("events") for r in rows[k]},
          "baseline us", {repr(r["baseline"]["time_s"] * 1e6) for r in rows[k]})
