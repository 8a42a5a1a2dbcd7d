"""CPU time and result of sweep points of the scaling grid: point.py OUT.json INDEX..."""
import json, sys, time
from mkernel.studies import study, sweep
pts = study.grid()
order = sorted(range(len(pts)), key=lambda i: 0)
rows = {}
for i in map(int, sys.argv[2:]):
    t = time.process_time(); row = sweep.run_point(pts[i]); dt = time.process_time() - t
    print(f"{i:5d} {dt:7.2f}s {pts[i].key}", file=sys.stderr)
    rows[i] = {k: v for k, v in row.items() if "wall" not in k}
json.dump(rows, open(sys.argv[1], "w"), indent=1, sort_keys=True, default=str)
