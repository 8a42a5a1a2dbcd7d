"""Every Simple-ring point of the p5 curves: per-channel share and the model's error (is the EFA Simple ring too slow at small shares?)."""
from mkernel import nccl
from mkernel.studies import nccl_check
for cv in nccl_check.load():
    if cv.machine != "p5" or cv.coll == "alltoall":
        continue
    for nodes, nb, meas in cv.points:
        f = cv.fabric(nodes)
        if nodes < 2: continue
        e = nccl.estimate(cv.coll, nb, f)
        if e.algo != "ring": continue
        c = nb / (f.world * nccl.channels(f))
        err = e.busbw_gb_per_s / meas - 1
        if e.proto == "Simple" or c <= 2 << 20:
            print(f"{cv.id:12s} {nodes:2d}n {nb/2**20:6.0f} MiB {e.proto:6s} share/ch {c/2**10:6.0f} KiB  meas {meas:6.1f} model {e.busbw_gb_per_s:6.1f} err {err:+.1%}")
