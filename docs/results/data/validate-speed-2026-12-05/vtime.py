"""validate() CPU time on a freshly built 2 x 8 GEMM+AR 32768^2 fused schedule (the every-node row's),
GC paused; prints seconds per round, and a hash of the returned table.
usage: vtime.py [ROUNDS] [--profile]"""
import dataclasses
import hashlib
import sys
import time

from mkernel import builders, ir
from mkernel.scenario import load_scenario

sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
mk, c = builders.get("gemm_ar"), sc.cluster
rounds = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 1
for _ in range(rounds):
    with ir.paused_gc():
        fused = mk.build(w, c, grouped=True)
    if "--profile" in sys.argv:
        import cProfile
        import pstats
        pr = cProfile.Profile()
        with ir.paused_gc():
            pr.enable()
            table = fused.validate()
            pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(30)
    t = time.process_time()
    with ir.paused_gc():
        table = fused.validate()
    dt = time.process_time() - t
    d = hashlib.sha256()
    recs, fields, codes = table
    d.update(recs.tobytes() + str(recs.dtype).encode() + repr(codes).encode())
    for k, v in fields.items():
        d.update(k.encode() + v.tobytes())
    print(f"{dt:.4f} {d.hexdigest()[:16]}", flush=True)
    del fused, table
