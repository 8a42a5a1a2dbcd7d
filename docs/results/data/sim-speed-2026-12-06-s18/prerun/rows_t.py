import timeit, collections
from itertools import repeat
import numpy as np
from mkernel.members import int_array
from mkernel.sim import SimBackend, hazardlog as H
from row import c, fused  # (the row's fused build, shared)
orig = H.LoggedTracker.finish
def fin(self):
    log = self._log
    tasks, first, n, times = (log[f::4] for f in range(4))
    print(collections.Counter(type(x).__name__ for x in n), collections.Counter(type(x).__name__ for x in first), collections.Counter(type(x).__name__ for x in times))
    pos = self._pos
    T = lambda f: min(timeit.repeat(f, number=1, repeat=7)) * 1e3
    print("p current", T(lambda: int_array(list(map(pos.get, map(id, tasks), repeat(-1))))))
    print("n float", T(lambda: np.array(n, np.float64)))
    print("n listcomp", T(lambda: int_array([-1 if x is None else x for x in n])))
    print("times", T(lambda: np.array(times, np.float64)))
    print("first", T(lambda: int_array(first)))
    orig(self)
H.LoggedTracker.finish = fin
SimBackend().run(fused, c, collapse=False)
