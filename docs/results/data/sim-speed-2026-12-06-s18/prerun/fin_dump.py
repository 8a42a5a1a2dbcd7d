"""Pickle the every-node row's fused tracked run's hazard log (with its schedule) for fin_ir.py."""
import pickle, sys
from mkernel.sim import SimBackend, hazardlog as H
from row import c, fused  # (the row's fused build, shared)
orig = H.LoggedTracker.finish
def fin(self):
    if self.schedule is fused:
        with open(sys.argv[1], "wb") as f:
            pickle.dump((self.schedule, self._log, self._ends), f, protocol=5)
    orig(self)
H.LoggedTracker.finish = fin
SimBackend().run(fused, c, collapse=False)
