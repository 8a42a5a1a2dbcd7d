"""Entries, members and regions per role/op of the every-node row's fused build (grouped, as the simulator gets
it), with the probe knob off, on and at the what-if "every" (`gemm_ar.ROW_GROUPS`), and whether the knob-on build
expands to the knob-off build task for task. Run from the checkout root with the venv active: `python .../counts.py`."""
import collections
import time

from mkernel.builders import gemm_ar
from mkernel.ir import expand
from mkernel.runner import build
from mkernel.scenario import load_scenario
import dataclasses

sc = load_scenario("scenarios/paper-ib-2x8.toml")
sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, m=32768, n=32768, k=2048))


def table(s) -> dict:
    rows = collections.defaultdict(lambda: [0, 0, 0, 0])  # entries, members, region records, member regions
    for t in s.tasks:
        r = rows[f"{t.role.value}/{t.op.value}" + (" bcast" if "bcast" in t.label else "")]
        nreg = len(t.reads) + len(t.writes)
        r[0] += 1
        r[1] += t.count
        r[2] += nreg
        r[3] += nreg * t.count
    rows["total"] = [sum(r[i] for r in list(rows.values())) for i in range(4)]
    return dict(rows)


out = {}
for knob in (False, True, "every"):
    gemm_ar.ROW_GROUPS = knob
    cpu = time.process_time()
    s = gemm_ar.build(sc.workload, sc.cluster, grouped=True)
    out[knob] = s
    print(f"ROW_GROUPS={knob}: build {time.process_time() - cpu:.2f} s CPU")
    print(f"  {'role/op':22} {'entries':>8} {'members':>8} {'regions':>8} {'member regions':>14}")
    for k, (e, m, r, mr) in table(s).items():
        print(f"  {k:22} {e:8d} {m:8d} {r:8d} {mr:14d}")
    # entries per GEMM group size, per local rank
    sizes = collections.Counter((t.rank % 8, t.count) for t in s.tasks if t.op.value == "gemm")
    print("  GEMM (local rank, members per entry): entries", dict(sorted(sizes.items())))
gemm_ar.ROW_GROUPS = False
a, b = expand(out[False]), expand(out[True])
print("expanded knob-on == expanded knob-off, task for task:", a.tasks == b.tasks, len(a.tasks))
