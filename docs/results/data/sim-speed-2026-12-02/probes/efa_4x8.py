"""efa-400g-rail-4x8 gemm_ar 8192, both profiles, with and without SRD jitter, on the code PYTHONPATH names."""
from mkernel.studies.sweep import Point, run_point
import mkernel.sim.engine as e
print("code:", e.__file__)
for prof in ("measured", "reference"):
    for opt in ((), (("nic.srd_jitter_us", 0.0),)):
        row = run_point(Point("scaleout/efa-400g-rail-4x8", "gemm_ar", 8192, (("m", 8192), ("n", 8192), ("k", 512)),
                              (("kernels", prof),) + opt))
        print(prof, opt, row.get("fused_us"), row.get("error"))
