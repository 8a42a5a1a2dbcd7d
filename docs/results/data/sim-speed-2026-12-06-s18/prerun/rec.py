import dataclasses, time, gc
from itertools import chain
import numpy as np
from mkernel import builders, ir
from mkernel.members import _records, Codes, int_array
from mkernel.scenario import load_scenario
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
mk, c = builders.get("gemm_ar"), sc.cluster
with ir.paused_gc():
    s = mk.build(w, c, grouped=True)
tasks = s.tasks
gc.disable()
def t(label, f, n=7):
    best = 1e9
    for _ in range(n):
        a = time.perf_counter(); r = f(); best = min(best, time.perf_counter() - a)
    print(f"{label:30s} {best*1e3:7.2f} ms"); return r
reads, writes = t("reads/writes lists", lambda: ([t.reads for t in tasks], [t.writes for t in tasks]))
regions = t("chain", lambda: list(chain.from_iterable(chain.from_iterable(zip(reads, writes)))))
codes = Codes((b.name, i) for i, b in enumerate(s.buffers))
t("_records", lambda: _records(regions, codes, np.int32))
t("one listcomp rank", lambda: [r.rank for r in regions])
t("int_array of rank", lambda: int_array([r.rank for r in regions], np.int32))
t("buffer codes", lambda: [codes[r.buffer] for r in regions])
t("ids", lambda: list(map(id, regions)))
import array, struct
vals = [r.rank for r in regions]
rows = [r.row0 for r in regions]
t("int_array only (pack)", lambda: int_array(vals, np.int32))
t("int_array rows (pack)", lambda: int_array(rows, np.int32))
t("array.array i", lambda: np.frombuffer(array.array('i', vals), np.int32))
t("array.array rows", lambda: np.frombuffer(array.array('i', rows), np.int32))
t("np.array", lambda: np.array(vals, np.int32))
t("fromiter", lambda: np.fromiter(vals, np.int32, len(vals)))
t("array.array q rows", lambda: np.frombuffer(array.array('q', rows), np.int64))
def chunked():
    out = np.empty(len(rows), np.int32)
    for lo in range(0, len(rows), 8192):
        part = rows[lo:lo+8192]
        out[lo:lo+len(part)] = np.frombuffer(array.array('i', part), np.int32)
    return out
t("array chunked", chunked)
def chunked_struct():
    out = np.empty(len(rows), np.int32)
    for lo in range(0, len(rows), 8192):
        part = rows[lo:lo+8192]
        out[lo:lo+len(part)] = int_array(part, np.int32)
    return out
t("struct chunked", chunked_struct)
