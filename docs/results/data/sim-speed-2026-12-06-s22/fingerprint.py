"""The every-node row's fingerprint, as docs/results/data/sim-event-path-2026-12-05/fingerprint.py makes it (that
script is run as it is), on a core whose engine hands the hazard tracker's checks and landings to a native log
(sim/calllog.py) rather than to the tracker's methods, which that script patches to note each call: here each run's
log is set to hand every call to the tracker (calllog.Forward), so the patched methods see them as before. On a
core without the log (the base) nothing is changed. usage: fingerprint.py out.npz"""
import runpy
from pathlib import Path

from mkernel.sim import engine

orun = engine.Model.run


def run(self):
    if hasattr(self, "log") and type(self.tracker).__name__ == "LoggedTracker":
        from mkernel.sim.calllog import Forward
        self.log = Forward(self.tracker)
    orun(self)


engine.Model.run = run
runpy.run_path(str(Path(__file__).parents[1] / "sim-event-path-2026-12-05" / "fingerprint.py"), run_name="__main__")
