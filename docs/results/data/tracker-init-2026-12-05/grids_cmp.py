"""Compare two dump_grids.py pickles: every array equal (values and dtype), the same keys.
Usage: python grids_cmp.py BASE.pkl OURS.pkl"""
import pickle
import sys

import numpy as np

a, b = (pickle.load(open(p, "rb")) for p in sys.argv[1:3])
bad = 0
assert a.keys() == b.keys(), (a.keys() ^ b.keys())
for name in a:
    x, y = a[name], b[name]
    for k in sorted(x.keys() | y.keys()):
        if k not in x or k not in y:
            print("MISSING", name, k, "base" if k not in x else "ours")
            bad += 1
        elif not (np.array_equal(x[k], y[k]) and x[k].dtype == y[k].dtype):
            print("DIFFER", name, k, x[k].dtype, y[k].dtype, x[k].shape, y[k].shape)
            bad += 1
print(f"{len(a)} schedules, {sum(len(x) for x in a.values())} arrays; {bad} differ")
sys.exit(1 if bad else 0)
