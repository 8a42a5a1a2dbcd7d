"""A seeded sample of the scaling grid's points run as the sweep runs them (for callgrind Ir: base tree against this)."""
import random, sys
from mkernel.studies import study, sweep
pts = study.grid()
random.seed(int(sys.argv[2]) if len(sys.argv) > 2 else 30)
for p in random.sample(pts, int(sys.argv[1])):
    sweep.run_point(p)
