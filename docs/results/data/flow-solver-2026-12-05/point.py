import sys, time, json, os
from mkernel.studies import study, sweep
keys = sys.argv[1:] or ["scaleout/gb200-nvl72-800g-2x72/moe_dispatch_gemm/128"]
grid = {p.key: p for p in study.grid()}
for key in keys:
    p = grid[key]
    t0 = time.time(); c0 = time.process_time(); l0 = os.getloadavg()[0]
    row = sweep.run_point(p)
    print(json.dumps({"key": p.key, "code": os.environ.get("TAG", "branch"), "wall": round(time.time()-t0, 2), "cpu": round(time.process_time()-c0, 2),
                      "load": l0, "fused_us": row["fused_us"], "baseline_us": row["baseline_us"], "events": row.get("events")}), flush=True)
