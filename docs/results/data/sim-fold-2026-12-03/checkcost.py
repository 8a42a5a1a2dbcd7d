"""CPU seconds that the branch adds to a collapsed run: refusal() and fold_locals() on the schedule
the run would simulate (collapse's output), best of 5, for each case of refused.py and for the 2x8
GEMM+AR row's two schedules (which fold). Run from the branch's worktree."""
import json
import sys
import time

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from refused import BIG, CASES, c, swap_last_bumps  # noqa: E402  (refused.py runs nothing on import)

from mkernel import builders  # noqa: E402
from mkernel.sim.collapse import collapse  # noqa: E402
from mkernel.sim.localfold import NotFoldable, fold_locals, refusal  # noqa: E402

module = builders.get("gemm_ar")
runs = {"2x8-row": [module.build(BIG, c, first_nodes=1, grouped=True),
                    module.build_baseline(BIG, c, first_nodes=1, grouped=True, library_tasks=False)]}
for name in ("moe-zipf", "late"):
    w, _ = CASES[name]
    m = builders.get(w.kernel)
    runs[name] = ([swap_last_bumps(m.build(w, c, first_nodes=1, grouped=True))] if name == "late"
                  else [m.build(w, c, grouped=True), m.build_baseline(w, c, grouped=True)])
for name, schedules in runs.items():
    for s in schedules:
        run = collapse(s, s.first_nodes or c.fold_nodes)
        best, said = None, None
        for _ in range(5):
            t0 = time.process_time()
            said = refusal(run, c)
            if said is None:
                try:
                    fold_locals(run)
                    said = "folded"
                except NotFoldable as e:
                    said = f"refused: {e}"
            cpu = time.process_time() - t0
            best = cpu if best is None else min(best, cpu)
        print(json.dumps({"case": name, "variant": s.variant, "tasks": len(run.tasks), "check_cpu_s": round(best, 4),
                          "outcome": said[:140]}), flush=True)
