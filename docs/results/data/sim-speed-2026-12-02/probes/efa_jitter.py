"""efa gemm_ar points with and without SRD jitter, on whichever code PYTHONPATH names."""
try:
    from mkernel.studies.sweep import Point, run_point
except ImportError:
    from mkernel.sweep import Point, run_point
import mkernel.sim.engine as e
print("code:", e.__file__)
for size, k in ((4096, 256), (8192, 512)):
    for opt in ((), (("nic.srd_jitter_us", 0.0),)):
        row = run_point(Point("paper-efa-2x8", "gemm_ar", size, (("m", size), ("n", size), ("k", k)),
                              (("kernels", "reference"),) + opt))
        print(size, opt, row.get("fused_us"), row.get("error"))
