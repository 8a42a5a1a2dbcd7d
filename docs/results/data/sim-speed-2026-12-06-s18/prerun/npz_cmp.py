import sys, numpy as np
a, b = np.load(sys.argv[1], allow_pickle=True), np.load(sys.argv[2], allow_pickle=True)
bad = [k for k in a.files if not (a[k].shape == b[k].shape and np.array_equal(a[k], b[k]))] + sorted(set(a.files) ^ set(b.files))
print("ALL SAME" if not bad else f"DIFFER {bad}", len(a.files), "arrays; dtypes differ:", [k for k in a.files if k in b.files and a[k].dtype != b[k].dtype])
