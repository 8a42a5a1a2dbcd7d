"""For the board's next step: can validate's signal table hand the simulator each entry's bump keys as
dense integers, in flat_keys' order? On the every-node row's fused schedule: what kinds of signal lists
its entries have (flat_keys' cases: fixed signals only, one stepping beside fixed ones, a cycling tile row),
how long the table takes, and whether its bump records come entry by entry. usage: python table_keys.py"""
import collections
import dataclasses
import time

import numpy as np

from mkernel import builders
from mkernel.ir import paused_gc
from mkernel.scenario import load_scenario
from mkernel.signal_table import signal_table

sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
with paused_gc():
    s = builders.get("gemm_ar").build(w, sc.cluster, grouped=True)
    t0 = time.process_time()
    tbl = signal_table(s)
    print(f"signal_table: {time.process_time() - t0:.3f} s CPU, {tbl.keys} keys, {len(tbl.bump_key)} bump records, "
          f"{len(tbl.wait_key)} wait records")
    kinds = collections.Counter()
    for t in s.tasks:
        st = t.step
        moving = sum(1 for d in (st.signals if t.count > 1 and st.signals else ()) if any(d))
        kinds[("group" if t.count > 1 else "plain", "cycling" if t.count > 1 and st.period else "",
               f"{len(t.signals)} signals", f"{moving} stepping")] += 1
    for k, v in kinds.most_common():
        print(f"{v:7d} entries  {' '.join(x for x in k if x)}")
    starts = np.searchsorted(tbl.bump_entry, np.arange(len(s.tasks) + 1)) if np.all(np.diff(tbl.bump_entry) >= 0) else None
    print(f"the table's bump records sorted by entry: {starts is not None} (fixed records first, then the stepping "
          f"ones record by record: an entry's keys are not one slice in member order)")
