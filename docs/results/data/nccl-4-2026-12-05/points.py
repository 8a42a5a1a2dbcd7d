"""Every checked point of the p5 curves: error of predicted busbw and what the model ran (run once per revision)."""
import json, sys
from mkernel.studies import nccl_check as nc
out = {}
for c in nc.load():
    if c.id.startswith("p5-"):
        for p in nc.point_errors(c):
            out[f"{c.id} {p.nodes} {p.nbytes >> 20}"] = (round(p.error, 4), f"{p.algo}/{p.proto}")
json.dump(out, sys.stdout, indent=0)
