import sys, numpy as np
a, b = np.load(sys.argv[1], allow_pickle=True), np.load(sys.argv[2], allow_pickle=True)
assert set(a.files) == set(b.files), set(a.files) ^ set(b.files)
bad = [k for k in a.files if not (a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and (a[k] == b[k]).all())]
print('DIFF', bad) if bad else print('ALL SAME', len(a.files))
