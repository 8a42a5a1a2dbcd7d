import dataclasses, timeit
from mkernel import builders, ir, members
from mkernel.members import Entries
from mkernel.scenario import load_scenario
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
mk, c = builders.get("gemm_ar"), sc.cluster
with ir.paused_gc():
    s = mk.build(w, c, grouped=True)
e = Entries(s.tasks)
T = lambda f: min(timeit.repeat(f, number=1, repeat=9)) * 1e3
for name, items in (("regions", [st.regions for st in e.steps]), ("signals", [st.signals for st in e.steps if st.signals]),
                    ("waits", [st.waits for st in e.steps if st.waits])):
    a, b = members.distinct(items), members.distinct(items, runs=True)
    assert (a[0] == b[0]).all() and (a[1] == b[1]).all()
    print(name, round(T(lambda: members.distinct(items)), 2), round(T(lambda: members.distinct(items, runs=True)), 2))
