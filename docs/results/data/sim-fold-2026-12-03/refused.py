"""CPU seconds of SimBackend.run on collapsed runs that may not fold, best of 3 (run from the tree
to time: the branch's worktree, or main's archive; see runrows.sh). Prints each result's time_s,
per_rank_s and bytes too, to compare the trees' results.

  moe-zipf: MoE, shifted Zipf routing (node-symmetric, so collapsed; each local rank routes
            differently, so the rotation check refuses it)
  trace:    the 2x8 GEMM+AR at 8192^2 with a trace (refused before the check)
"""
import dataclasses
import json
import sys
import time

from mkernel import Workload, builders, load_scenario
from mkernel.sim import SimBackend

c = load_scenario("scenarios/paper-ib-2x8.toml").cluster
CASES = {
    "moe-zipf": (Workload(kernel="moe_dispatch_gemm", m=4096 * c.world, n=4096, k=2048, experts=4 * c.world, topk=2,
                          routing="zipf_shifted"), {}),
    "trace": (Workload(kernel="gemm_ar", m=8192, n=8192, k=512), {"trace": True}),
}
for name in sys.argv[1:]:
    w, kw = CASES[name]
    module = builders.get(w.kernel)
    for s in (module.build(w, c, grouped=True), module.build_baseline(w, c, grouped=True)):
        best = None
        for _ in range(3):
            t0 = time.process_time()
            r = SimBackend().run(s, c, collapse=True, **kw)
            cpu = time.process_time() - t0
            best = cpu if best is None else min(best, cpu)
        print(json.dumps({"case": name, "variant": s.variant, "cpu_s": round(best, 3), "events": r.events,
                          "ranks_folded": r.metrics.get("ranks_folded"), "time_s": r.time_s,
                          "per_rank_s": r.per_rank_s, "bytes_total": r.bytes_total}), flush=True)
