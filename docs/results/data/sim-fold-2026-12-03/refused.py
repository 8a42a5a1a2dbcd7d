"""CPU seconds of SimBackend.run on collapsed runs that may not fold, best of 3. Run it with the
tree to time first on the path (PYTHONPATH=TREE: a script's own folder, not the working folder,
heads sys.path); see runrows.sh. Prints each result's time_s, per_rank_s and bytes too, to compare
the trees' results.

  moe-zipf: MoE, shifted Zipf routing (node-symmetric, so collapsed; each local rank routes
            differently, so the rotation check refuses it)
  late:     the 2x8 GEMM+AR 32768^2 fused, built for node 0, with the last two single bumping
            tasks of local rank 1 swapping their bumps: the check reads everything before it refuses
  trace:    the 2x8 GEMM+AR at 8192^2 with a trace (refused before the check)
"""
import dataclasses
import json
import sys
import time

from mkernel import Workload, builders, load_scenario
from mkernel.sim import SimBackend

c = load_scenario("scenarios/paper-ib-2x8.toml").cluster
BIG = Workload(kernel="gemm_ar", m=32768, n=32768, k=2048)
CASES = {
    "moe-zipf": (Workload(kernel="moe_dispatch_gemm", m=4096 * c.world, n=4096, k=2048, experts=4 * c.world, topk=2,
                          routing="zipf_shifted"), {}),
    "late": (BIG, {}),
    "trace": (Workload(kernel="gemm_ar", m=8192, n=8192, k=512), {"trace": True}),
}


def swap_last_bumps(s):
    """Local rank 1's last two single one-bump tasks trade bumps (same work, other signals)."""
    tasks = list(s.tasks)
    i, j = [k for k, t in enumerate(tasks) if t.rank == 1 and t.count == 1 and len(t.signals) == 1][-2:]
    tasks[i], tasks[j] = (dataclasses.replace(tasks[i], signals=tasks[j].signals),
                          dataclasses.replace(tasks[j], signals=tasks[i].signals))
    return dataclasses.replace(s, tasks=tuple(tasks))


for name in sys.argv[1:]:  # (nothing when imported)
    w, kw = CASES[name]
    module = builders.get(w.kernel)
    if name == "late":
        schedules = [swap_last_bumps(module.build(w, c, first_nodes=1, grouped=True))]
    else:
        schedules = [module.build(w, c, grouped=True), module.build_baseline(w, c, grouped=True)]
    for s in schedules:
        best = None
        for _ in range(3):
            t0 = time.process_time()
            r = SimBackend().run(s, c, collapse=True, **kw)
            cpu = time.process_time() - t0
            best = cpu if best is None else min(best, cpu)
        print(json.dumps({"case": name, "variant": s.variant, "cpu_s": round(best, 3), "events": r.events,
                          "ranks_folded": r.metrics.get("ranks_folded"), "time_s": r.time_s,
                          "per_rank_s": r.per_rank_s, "bytes_total": r.bytes_total}), flush=True)
