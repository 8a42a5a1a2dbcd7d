import dataclasses, time, timeit
import numpy as np
from mkernel import builders, ir, members, validation as V
from mkernel.members import Entries, int_array
from mkernel.scenario import load_scenario
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
mk, c = builders.get("gemm_ar"), sc.cluster
with ir.paused_gc():
    s = mk.build(w, c, grouped=True)
e = Entries(s.tasks)
T = lambda f: min(timeit.repeat(f, number=1, repeat=9)) * 1e3
for name, items in (("regions", [st.regions for st in e.steps]), ("signals", [st.signals for st in e.steps if st.signals]),
                    ("waits", [st.waits for st in e.steps if st.waits]), ("task signals", [t.signals for t in s.tasks])):
    heads = 1 + sum(a is not b for a, b in zip(items, items[1:]))
    print(name, len(items), "run heads", heads, "distinct", len(set(map(id, items))),
          "distinct ms", round(T(lambda: members.distinct(items)), 2),
          "is-pairs ms", round(T(lambda: [a is not b for a, b in zip(items, items[1:])]), 2))
