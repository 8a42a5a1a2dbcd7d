"""Minor faults and system time of touching 240 MB in 8 MB numpy arrays, with numpy's huge-page requests on (argv 1) or
off (0): how the twenty-fifth session found THP compaction stalls on this VM (the results note quotes two runs each:
plain 0.165-0.170 s of system time; huge pages 0.047 s and 1.128 s). usage: python faultcost.py 0|1"""
import numpy as np, resource, time, sys
from numpy._core import multiarray as m
m._set_madvise_hugepage(sys.argv[1] == "1")
def ru(): r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_utime, r.ru_stime, r.ru_minflt
u0, s0, f0 = ru(); t = time.perf_counter()
arrs = []
for _ in range(30):
    a = np.empty(2**20, np.int64); a[::512] = 1; arrs.append(a)   # 8 MB each, touch every page
u1, s1, f1 = ru()
print(f"hugepage={sys.argv[1]} 240MB: faults {f1-f0} user {u1-u0:.3f} sys {s1-s0:.3f} wall {time.perf_counter()-t:.3f}  per-fault {1e6*(s1-s0)/max(1,f1-f0):.2f} us")
