"""validate()'s verdict on seeded mutations of small builds (every builder, fused and baseline, grouped and
flat, full and first-node), one line each: the error's type and message, or a hash of the returned table.
Each mutation changes one number or field of one task (a region's bounds, rank or buffer; a signal or wait;
a task's rank, launch, role, op, id or count; a group's step), or drops, duplicates or swaps tasks, so most
break a rule and the message names which. Run from base and from the branch, then diff.
usage: vmutate.py [MUTATIONS_PER_BUILD]"""
import dataclasses
import hashlib
import random
import sys

from mkernel import Cluster, Workload, builders, ir
from mkernel.builders import KERNELS
from mkernel.ir import Op, Region, Role, Signal, Wait

N = int(sys.argv[1]) if len(sys.argv) > 1 else 12


def verdict(s) -> str:
    try:
        with ir.paused_gc():
            got = s.validate(races=len(s.tasks) < 400)
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    if got is None:
        return "None"
    recs, fields, codes = got
    d = hashlib.sha256(recs.tobytes() + str(recs.dtype).encode() + repr(codes).encode())
    for k, v in fields.items():
        d.update(k.encode() + str(v.dtype).encode() + v.tobytes())
    return "ok " + d.hexdigest()[:16]


def nudge(rng, x: int) -> int:
    return x + rng.choice((-1, 1, -64, 64, 10 ** 6, -x - 1))


def mutate_region(rng, r: Region, buffers) -> Region:
    f = rng.choice(("buffer", "rank", "row0", "row1", "col0", "col1"))
    if f == "buffer":
        return dataclasses.replace(r, buffer=rng.choice([b.name for b in buffers] + ["nope"]))
    return dataclasses.replace(r, **{f: nudge(rng, getattr(r, f))})


def mutate_task(rng, t, s):
    kinds = ["region", "rank", "launch", "role", "op", "signal", "wait", "waitcount", "id", "count", "step",
             "dropsig", "dropwait", "accumulate"]
    k = rng.choice(kinds)
    regions = t.reads + t.writes
    if k == "region" and regions:
        j = rng.randrange(len(regions))
        regions = regions[:j] + (mutate_region(rng, regions[j], s.buffers),) + regions[j + 1:]
        return dataclasses.replace(t, reads=regions[:len(t.reads)], writes=regions[len(t.reads):])
    if k == "rank":
        return dataclasses.replace(t, rank=nudge(rng, t.rank) % (s.world + 2))
    if k == "launch":
        return dataclasses.replace(t, launch=t.launch + rng.choice((-1, 1, 5)))
    if k == "role":
        return dataclasses.replace(t, role=rng.choice(list(Role)))
    if k == "op":
        return dataclasses.replace(t, op=rng.choice(list(Op)))
    if k == "signal" and t.signals:
        j = rng.randrange(len(t.signals))
        g = t.signals[j]
        g = rng.choice((Signal(nudge(rng, g.rank) % (s.world + 1), g.name, g.index), Signal(g.rank, g.name, g.index + 1),
                        Signal(g.rank, "other", g.index)))
        return dataclasses.replace(t, signals=t.signals[:j] + (g,) + t.signals[j + 1:])
    if k in ("wait", "waitcount") and t.waits:
        j = rng.randrange(len(t.waits))
        w = t.waits[j]
        w = (Wait(w.signal, w.count + rng.choice((-w.count, 1, 1000))) if k == "waitcount" else
             Wait(Signal(rng.choice((w.signal.rank, (w.signal.rank + 1) % s.world)), w.signal.name,
                         w.signal.index + rng.choice((0, 1, 7))), w.count))
        return dataclasses.replace(t, waits=t.waits[:j] + (w,) + t.waits[j + 1:])
    if k == "id":
        return dataclasses.replace(t, id=t.id + 1)
    if k == "count":
        return dataclasses.replace(t, count=max(1, t.count + rng.choice((-1, 1))))
    if k == "step" and t.step is not None:
        st = t.step
        f = rng.choice(("regions", "signals", "waits", "rotate", "period", "outer", "label"))
        if f == "regions" and st.regions:
            j = rng.randrange(len(st.regions))
            v = list(st.regions[j])
            v[rng.randrange(3)] += rng.choice((-1, 1, 128))
            return dataclasses.replace(t, step=dataclasses.replace(st, regions=st.regions[:j] + (tuple(v),) + st.regions[j + 1:]))
        if f == "signals" and st.signals:
            j = rng.randrange(len(st.signals))
            v = list(st.signals[j])
            v[rng.randrange(2)] += rng.choice((-1, 1))
            return dataclasses.replace(t, step=dataclasses.replace(st, signals=st.signals[:j] + (tuple(v),) + st.signals[j + 1:]))
        if f == "waits" and st.waits:
            return dataclasses.replace(t, step=dataclasses.replace(st, waits=st.waits[1:]))
        if f == "rotate":
            return dataclasses.replace(t, step=dataclasses.replace(st, rotate=st.rotate + rng.choice((-1, 1))))
        if f == "period":
            return dataclasses.replace(t, step=dataclasses.replace(st, period=st.period + rng.choice((-1, 1, 2))))
        if f == "outer" and st.outer:
            return dataclasses.replace(t, step=dataclasses.replace(st, outer=st.outer[:-1]))
        if f == "label":
            return dataclasses.replace(t, step=dataclasses.replace(st, label=(st.label[0], st.label[1] + 1)))
        return dataclasses.replace(t, step=None)
    if k == "dropsig" and t.signals:
        return dataclasses.replace(t, signals=t.signals[1:])
    if k == "dropwait" and t.waits:
        return dataclasses.replace(t, waits=t.waits[1:])
    return dataclasses.replace(t, accumulate=not t.accumulate)


def mutate(rng, s):
    tasks = list(s.tasks)
    k = rng.random()
    i = rng.randrange(len(tasks))
    if k < 0.05:
        del tasks[i]
    elif k < 0.1:
        tasks.append(dataclasses.replace(tasks[i], id=len(tasks)))
    elif k < 0.13 and len(tasks) > 1:
        j = rng.randrange(len(tasks))
        tasks[i], tasks[j] = dataclasses.replace(tasks[j], id=i), dataclasses.replace(tasks[i], id=j)
    else:
        tasks[i] = mutate_task(rng, tasks[i], s)
    return dataclasses.replace(s, tasks=tuple(tasks))


out = []
w = Workload(m=512, n=1024, k=64, chunk_tiles=2, baseline_chunk_kib=64)
for cluster in (Cluster("t", 2, 2), Cluster("t", 1, 4), Cluster("t", 2, 4, transport="efa_srd"), Cluster("t", 3, 2)):
    for name in KERNELS:
        m = builders.get(name)
        for grouped in (True, False):
            for kw in ({}, {"first_nodes": 1}):
                for build in (m.build, m.build_baseline):
                    case = f"{name} {cluster.nodes}x{cluster.gpus_per_node} {grouped} {kw} {build.__name__}"
                    try:
                        with ir.paused_gc():
                            s = build(w, cluster, grouped=grouped, **kw)
                    except Exception as e:
                        out.append(f"{case}: {type(e).__name__}")
                        continue
                    rng = random.Random(case)
                    out.append(f"{case}: {verdict(s)}")
                    for j in range(N):
                        out.append(f"{case} #{j}: {verdict(mutate(rng, s))}")
print("\n".join(out))
