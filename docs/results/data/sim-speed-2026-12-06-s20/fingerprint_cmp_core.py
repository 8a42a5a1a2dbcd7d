"""fingerprint_cmp.py (docs/results/data/sim-event-path-2026-12-05/) less the one field a core adds: each run's
metrics now name the simulator core that ran them (sim_core), stripped from both (s21: the base names its core too).
usage: fingerprint_cmp_core.py BASE.npz OTHER.npz"""
import json, re, sys
import numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
ok = True
for k in ("chk", "land", "nland"):
    same = np.array_equal(a[k], b[k], equal_nan=True)
    print(k, "same" if same else "DIFFER")
    ok &= same
ma, mb = json.loads(str(a["meta"])), json.loads(str(b["meta"]))
for run in [*ma.values(), *mb.values()]:
    if isinstance(run, dict) and "metrics" in run:  # (the metrics dict's repr)
        run["metrics"] = re.sub(r", 'sim_core': '[^']*'", "", run["metrics"])
for k in ma:
    if ma[k] != mb[k]:
        print("DIFF", k, str(ma[k])[:200], "|", str(mb[k])[:200])
        ok = False
print("ALL SAME (but sim_core)" if ok else "MISMATCH")
