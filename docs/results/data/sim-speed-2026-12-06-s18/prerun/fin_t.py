"""min-of-N process time of LoggedTracker.finish on the every-node row's fused tracked run (log kept and replayed)."""
import sys, gc, time
from mkernel.sim import SimBackend, hazardlog as H
from row import c, fused  # (the row's fused build, shared)
orig = H.LoggedTracker.finish
N = int(sys.argv[1]) if len(sys.argv) > 1 else 7
def fin(self):
    log, ends = list(self._log), list(self._ends)
    best = 1e9
    for _ in range(N):
        self._log, self._ends = list(log), list(ends)
        gc.disable(); a = time.process_time(); orig(self); best = min(best, time.process_time() - a); gc.enable()
    print(f"finish {best*1e3:.1f} ms, log calls {len(log)//4}, hazards {len(self.hazards)}")
H.LoggedTracker.finish = fin
SimBackend().run(fused, c, collapse=False)
