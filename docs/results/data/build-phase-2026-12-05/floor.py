"""The object floor of the every-node row's build: re-create every object of the built schedule (each region,
signal, wait, step and task anew, with the builders' fast constructors), timed against the build itself in the same
process. usage (from a checkout root): python floor.py"""
import dataclasses
import time

import mkernel.builders.gemm_ar as g
from mkernel.ir import Wait, new_region, new_signal, new_step, new_task, paused_gc
from mkernel.scenario import load_scenario

sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, m=32768, n=32768, k=2048)
s = g.build(w, sc.cluster, grouped=True)


def copy() -> list:
    out = []
    for t in s.tasks:
        st = t.step
        out.append(new_task(
            t.id, t.rank, t.role, t.op, tuple([new_region(r.buffer, r.rank, r.row0, r.row1, r.col0, r.col1) for r in t.reads]),
            tuple([new_region(r.buffer, r.rank, r.row0, r.row1, r.col0, r.col1) for r in t.writes]), t.accumulate,
            tuple([Wait(new_signal(x.signal.rank, x.signal.name, x.signal.index), x.count) for x in t.waits]),
            tuple([new_signal(x.rank, x.name, x.index) for x in t.signals]), t.launch, t.chunk, t.label, t.mask, t.index,
            t.count, st and new_step(st.regions, st.signals, st.waits, st.chunk, st.label, st.period, st.outer, st.rotate)))
    return out


with paused_gc():
    for i in range(3):
        t0 = time.process_time()
        copy()
        t1 = time.process_time()
        g.build(w, sc.cluster, grouped=True)
        print(f"re-create every object {t1 - t0:.3f} s, build {time.process_time() - t1:.3f} s")
