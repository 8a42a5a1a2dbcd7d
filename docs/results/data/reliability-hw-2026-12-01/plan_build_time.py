"""Plan build of GEMM+AR 32768^2, K=2048 on 2x2: the old network-flag lookup (tuple.index, 9ebe304)
against the current one (dict), no profiler, same process and machine."""
import sys, time
from mkernel import builders
from mkernel.cluster import Cluster
from mkernel.problems import Workload
from mkernel.hw import plan
from mkernel.ir import Op

def old_network_flags(s, lowered):
    by_slot = {}
    for t in s.tasks:
        if t.op is Op.PUT:
            sig = t.signals[0]
            by_slot.setdefault((sig.rank, lowered[sig.rank].slot_names.index(sig)), []).append(t)
    flag_of, split, extra = {}, {}, {}
    for (rank, slot), puts in by_slot.items():
        if len(puts) == 1:
            flag_of[puts[0].id] = slot
            continue
        added = extra.setdefault(rank, [])
        first = len(lowered[rank].slot_bumps) + len(added)
        subs = tuple(range(first, first + len(puts)))
        added.extend(subs)
        split[(rank, slot)] = subs
        flag_of.update({t.id: f for t, f in zip(puts, subs)})
    return plan._NetFlags(flag_of, split, extra)

w = Workload(kernel="gemm_ar", m=32768, n=32768, k=2048)
# one schedule object per build: plan.build shares a schedule's lowering between its builds (since
# 0bc10e4), so timing both on one object would time the old lookup's build as a cache hit
s, s_old = (builders.get("gemm_ar").build(w, Cluster("t", 2, 2)) for _ in range(2))
t = time.perf_counter(); new = plan.build(s, 0)[0]; t_new = time.perf_counter() - t
plan._network_flags = old_network_flags
t = time.perf_counter(); old = plan.build(s_old, 0)[0]; t_old = time.perf_counter() - t
assert (old.tasks == new.tasks).all() and old.n_flags == new.n_flags
print(f"plan.build(rank 0), gemm_ar 32768^2 K=2048 on 2x2: tuple.index {t_old:.1f} s, dict {t_new:.1f} s")
