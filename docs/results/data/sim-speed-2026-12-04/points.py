"""CPU per sweep point for a seeded sample of the scaling grid (one process); argv: n seed out [exclude]"""
import json, random, sys, time
from mkernel.studies.study import grid
from mkernel.studies.sweep import run_point
n, seed, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
excl = sys.argv[4] if len(sys.argv) > 4 else "@@"
pts = [p for p in grid() if excl not in p.key]
sample = random.Random(seed).sample(pts, min(n, len(pts)))
with open(out, "w") as f:
    for p in sample:
        t = time.process_time()
        row = run_point(p)
        f.write(json.dumps({"key": p.key, "cpu": time.process_time() - t, "fused_us": row.get("fused_us"),
                            "baseline_us": row.get("baseline_us"), "err": row.get("error")}) + "\n"); f.flush()
