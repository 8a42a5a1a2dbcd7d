from mkernel import nccl
from mkernel.scenario import load_scenario
for t in ("paper-efa-2x8", "paper-ib-2x8"):
    f = nccl.fabric_of(load_scenario(t).cluster)
    for coll in ("all_reduce", "all_gather"):
        row = []
        for s in (8 << 20, 32 << 20, 128 << 20, 512 << 20, 2 << 30, 6 << 30):
            e = nccl.estimate(coll, s, f)
            row.append(f"{e.time_us:.0f} {e.algo[:4]}/{e.proto}")
        print(t, coll, " | ".join(row))
