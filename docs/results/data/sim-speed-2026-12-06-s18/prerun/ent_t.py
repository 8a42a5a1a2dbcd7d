import timeit
from itertools import repeat
import numpy as np
from mkernel.members import int_array
from mkernel.sim import SimBackend, hazardlog as H
from row import c, fused  # (the row's fused build, shared)
orig = H.LoggedTracker.finish
def fin(self):
    tasks = self._log[::4]
    T = lambda f: min(timeit.repeat(f, number=1, repeat=9)) * 1e3
    pos = self._pos
    from operator import is_
    ids = [t.id for t in tasks]; E = self.schedule.tasks
    print("there", sum(map(is_, map(E.__getitem__, ids), tasks)), len(tasks))
    print("map is", T(lambda: np.fromiter(map(is_, map(E.__getitem__, ids), tasks), bool, len(tasks))))
    print("lc is", T(lambda: [E[i] is t for i, t in zip(ids, tasks)]))
    print("lc is2", T(lambda: [E[t.id] is t for t in tasks]))
    print("dict", T(lambda: int_array(list(map(pos.get, map(id, tasks), repeat(-1))))))
    print("_entries", T(lambda: self._entries(tasks)))
    print("ids of t", T(lambda: int_array([t.id for t in tasks])))
    print("id()", T(lambda: int_array(list(map(id, tasks)))))
    print("make pos", T(lambda: dict(zip(map(id, self.schedule.tasks), range(len(self.schedule.tasks))))))
    orig(self)
H.LoggedTracker.finish = fin
SimBackend().run(fused, c, collapse=False)
