"""What nvplan.shared's per-entry key costs on the every-node row's fused build (49,152 NVLink groups, 48
plans): shared() and the key alone, twice. usage: python nvplan_keys.py"""
import dataclasses, time
from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim.engine import Model
from mkernel.sim import nvplan
from mkernel.sim.dispatch import NVLINK_OPS
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
with ir.paused_gc():
    s = builders.get("gemm_ar").build(w, sc.cluster, grouped=True)
    m = Model(s, sc.cluster, None, track_hazards=False)
    ts = [t for t in s.tasks if t.op in NVLINK_OPS]
    print(len(ts), "NVLink entries (groups);", len({id(t.reads) for t in ts}), "distinct reads tuples", len({id(t.writes) for t in ts}), "writes")
    for _ in range(2):
        t0 = time.process_time()
        for t in ts:
            nvplan.shared(m, t)
        t1 = time.process_time()
        for t in ts:
            key = (t.op, t.rank, t.accumulate, len(t.index), len(t.reads), *[(r.buffer, r.rank, r.row1 - r.row0, r.col1 - r.col0) for r in t.reads + t.writes])
        t2 = time.process_time()
        print(f"shared {1e3*(t1-t0):.1f} ms, key alone {1e3*(t2-t1):.1f} ms, plans {len(m._nv_plans)}")
    import collections
    print(collections.Counter(len(t.reads + t.writes) for t in ts))
