"""The hazard tracker's calls, member by member, in a tracked run of a grouped schedule and in the run
of its expansion: the same members, at the same instants, in the same order? Run from a checkout's root:
`python verify_order.py` (the golden cases, then the corpus), or with a case prefix and a tuple of
run options. Prints each mismatch and a count."""
import sys, dataclasses, importlib.util, random
sys.path.insert(0, "tests")
import numpy as np
from harness import golden_schedules as golden
from mkernel.ir import expand, Wait
from mkernel import Cluster, Workload, DeadlockError
from mkernel.builders import get, gemm_ar
from mkernel.sim import SimBackend
from mkernel.sim import hazards as hz

LOG = []
from mkernel.sim import engine
ENV = [None]
_init = engine.Model.__init__
def init(self, *a, **k):
    _init(self, *a, **k)
    ENV[0] = self.env
engine.Model.__init__ = init
orig_c, orig_l = hz.ArrivalTracker.check_reads, hz.ArrivalTracker.landed_writes
def span(self, task, first, n):
    p = self._pos.get(id(task))
    if p is None: p, f, k = self._member_of(task)
    else: f, k = first, (task.count - first if n is None else n)
    u = self._uid0[p] + f
    return list(range(u, u + k))
def check(self, task, now, first=0, n=None):
    LOG.append(("c", now, tuple(span(self, task, first, n))))
    return orig_c(self, task, now, first, n)
def land(self, task, first=0, n=None):
    LOG.append(("l", ENV[0].now, tuple(span(self, task, first, n))))
    return orig_l(self, task, first, n)
hz.ArrivalTracker.check_reads, hz.ArrivalTracker.landed_writes = check, land

def flat(log):
    out = []
    for kind, t, uids in log:
        out += [(kind, t, u) for u in uids]
    return out

def run(s, c, **kw):
    LOG.clear()
    try:
        st = SimBackend().run(s, c, **kw)
        res = (st.time_s, st.per_rank_s, st.bytes_total, st.hazards, st.metrics["breakdown_us"])
    except DeadlockError as e:
        res = ("deadlock", str(e))
    return res, flat(LOG)

def compare(name, s, c, **kw):
    a, la = run(expand(s), c, **kw)
    b, lb = run(s, c, **kw)
    groups = sum(t.count > 1 for t in s.tasks)
    ok = a == b and la == lb
    if not ok:
        diff = next((i for i, (x, y) in enumerate(zip(la, lb)) if x != y), min(len(la), len(lb)))
        if a != b and a[0] != "deadlock" and b[0] != "deadlock":
            print("  parts", [x == y for x, y in zip(a, b)], a[4], b[4])
        elif a != b: print(" ", str(a)[:300], "\n ", str(b)[:300])
        print("MISMATCH", name, kw, "results equal:", a == b, "logs equal:", la == lb, len(la), len(lb), "first diff", diff,
              la[diff:diff+3], lb[diff:diff+3])
    return ok, groups, len(la)

SEL = sys.argv[1] if len(sys.argv) > 1 else ''
KWS = eval(sys.argv[2]) if len(sys.argv) > 2 else ({'seed': 0}, {'seed': 3}, {'stress': 3.0, 'seed': 2})
n = bad = 0
for name, w, c, first in (golden.cases() if not SEL else []):
    if first or not ("/2x4/" in name or "/3x2/" in name or "/leaf" in name): continue
    for s in golden.build_pair_grouped(w, c, 0):
        for kw in ({}, {"stress": 3.0, "seed": 1}, {"trace": True}):
            ok, g, calls = compare(f"{name}/{s.variant}", s, c, **kw)
            n += 1; bad += not ok
print("goldens", n, "mismatches", bad)

# the hazard corpus (tests/sim/test_hazards.py) on grouped builds, and every op's wait mutants (tests/sim/test_mutations.py)
W = Workload(m=512, n=1024, k=64, chunk_tiles=2, baseline_chunk_kib=64)
_spec = importlib.util.spec_from_file_location("test_mutations", "tests/sim/test_mutations.py")
_mutations = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mutations)
mutants = _mutations.mutants  # every single-wait removal and count decrement

n = bad = withhz = 0
rng = random.Random(5)
cases = []
for nodes, gpus in ((2, 2), (1, 4), (2, 1)):
    c = Cluster("t", nodes, gpus)
    for s in (gemm_ar.build(W, c, grouped=True), gemm_ar.build_baseline(dataclasses.replace(W, collectives="ir"), c, grouped=True)):
        cases.append((f"gemm_ar {s.variant} {nodes}x{gpus}", s, c))
for nodes, gpus in ((2, 2), (2, 4), (3, 2)):
    c = Cluster("t", nodes, gpus, transport="efa_srd", notify="flag")
    cases.append((f"fused {nodes}x{gpus} srd", gemm_ar.build(W, c, grouped=True), c))
    cases.append((f"baseline {nodes}x{gpus} srd", gemm_ar.build_baseline(dataclasses.replace(W, collectives="ir"), c, grouped=True), c))
SHAPES = {
    "gemm_ar": dict(m=300, n=1040, k=24, chunk_tiles=2, baseline_chunk_kib=8),
    "gemm_rs": dict(m=520, n=600, k=24, chunk_tiles=2, baseline_chunk_kib=8),
    "ag_gemm": dict(m=4 * 150, n=1024, k=40, baseline_chunk_kib=4),
    "ring_attention": dict(m=40, n=3, k=32, tile_m=16, baseline_chunk_kib=2),
    "moe_dispatch_gemm": dict(m=192, n=160, k=32, experts=16, topk=3, tile_m=16, tile_n=32, routing="zipf"),
}
MC = Cluster("mut", 2, 2, transport="efa_srd")
for kernel, shape in SHAPES.items():
    module = get(kernel)
    w = Workload(kernel=kernel, collectives="ir", **shape)
    for s in (module.build(w, MC, grouped=True), module.build_baseline(w, MC, grouped=True)):
        ms = list(mutants(s))
        rng.shuffle(ms)
        cases += [(f"{kernel}/{s.variant} {d}", m, MC) for d, m in ms[:40]]
for name, s, c in [x for x in cases if x[0].startswith(SEL)]:
    for kw in KWS:
        ok, g, calls = compare(name, s, c, **kw)
        a, _ = run(s, c, **kw)
        withhz += bool(a[0] != "deadlock" and a[3])
        n += 1; bad += not ok
print("corpus runs", n, "mismatches", bad, "runs with hazards", withhz, "cases", len(cases),
      "groups in cases", sum(sum(t.count > 1 for t in s.tasks) > 0 for _, s, _ in cases))
