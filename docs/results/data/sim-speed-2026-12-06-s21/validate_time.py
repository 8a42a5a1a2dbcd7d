"""Time validate() of the every-node gemm_ar row's schedule N times (process_time), hash its result."""
import sys, time, hashlib, statistics, resource
sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from row_schedule import build
s = build()
from mkernel.validation import validate
n = int(sys.argv[1]) if len(sys.argv) > 1 else 5
ts, flt, us, ss = [], [], [], []
for _ in range(n):
    u0 = resource.getrusage(resource.RUSAGE_SELF)
    t = time.process_time(); r = validate(s); ts.append(time.process_time() - t)
    u1 = resource.getrusage(resource.RUSAGE_SELF)
    flt.append(u1.ru_minflt - u0.ru_minflt); us.append(u1.ru_utime - u0.ru_utime); ss.append(u1.ru_stime - u0.ru_stime)
recs, fields, codes = r
h = hashlib.sha1()
for a in (recs, *fields.values()):
    h.update(str((a.dtype, a.shape, a.strides, a.flags.writeable, a.flags.c_contiguous)).encode()); h.update(a.tobytes())
h.update(repr(list(fields)).encode()); h.update(repr(codes).encode())
print(f"{sys.argv[2] if len(sys.argv) > 2 else ''} min {min(ts):.4f} median {statistics.median(ts):.4f} all {' '.join(f'{t:.3f}' for t in ts)} hash {h.hexdigest()[:12]} faults {statistics.median(flt):.0f} user {statistics.median(us):.3f} sys {statistics.median(ss):.3f}")
