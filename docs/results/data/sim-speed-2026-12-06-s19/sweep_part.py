"""CPU of a seeded sample of the scaling grid run in-process as the sweep's workers run them; prints per-point CPU outliers."""
import random, sys, time, resource
from mkernel.studies import study, sweep
pts = study.grid()
random.seed(int(sys.argv[2]))
sample = random.sample(pts, int(sys.argv[1]))
t0 = time.process_time(); rows = []
for p in sample:
    s = time.process_time(); sweep.run_point(p); rows.append((time.process_time() - s, str(p)[:150]))
ru = resource.getrusage(resource.RUSAGE_SELF)
print(f"total {time.process_time() - t0:.2f} user {ru.ru_utime:.2f} sys {ru.ru_stime:.2f} maxrss {ru.ru_maxrss//1024} MB")
for d, p in sorted(rows, reverse=True)[:8]: print(f"{d:.3f} {p}")
