"""The tree's fan-in (mkernel.nccl._tree: a level with two children pays a chunk each way) against the
model without it: the fitted / held-out split on the 15 curves of nccl-5 (the 67 held-out points) and
on all 17, the per-point moves, and the EFA refit with and without it (rule: held out no worse).

    python docs/results/data/nccl-6-2026-12-05/fan_in.py [--fit] > docs/results/data/nccl-6-2026-12-05/fan-in.txt
"""
import math
import sys

from mkernel import nccl
from mkernel.studies import nccl_check

with_fan_in = nccl._tree


def without_fan_in(nbytes, f, proto):
    levels = max(1, math.ceil(math.log2(f.nodes)))
    chunk = nccl._tree_chunk(nbytes, f, proto)
    rate = nccl._node_net(f, f.t()) * nccl.PAYLOAD[proto] * 1e3 / nccl.channels(f)
    return with_fan_in(nbytes, f, proto) - 2 * (levels - 1) * chunk / rate


curves = nccl_check.load()
new = {"ib-ag-4n", "ib-ar-4n-curve"}
old = [c for c in curves if c.id not in new]


def report(tag, terms=None):
    s_old, s_all = nccl_check.split(old, terms), nccl_check.split(curves, terms)
    rows = {r["curve"]: r for r in nccl_check.summary(curves, terms)}
    met = sum(1 for r in rows.values() if r["goal_met"] and r["curve"] not in new)
    print(f"{tag}: fitted {s_old['fitted'][1]:.2%}, held out {s_old['held out'][1]:.2%} ({s_old['held out'][0]} points),"
          f" with the new curves {s_all['held out'][1]:.2%} ({s_all['held out'][0]}); curves <= 10%: {met} of 15;"
          f" p5-ar-2n {rows['p5-ar-2n']['mean_abs_error']:.1%}, p5-ar-scale {rows['p5-ar-scale']['mean_abs_error']:.1%}")


points = {}
for name, fn in (("without", without_fan_in), ("with", with_fan_in)):
    nccl._tree = fn
    report(f"{name} fan-in, committed terms")
    if "--fit" in sys.argv:
        t = nccl_check.fit("efa", curves)
        print(f"  refit efa: {t}")
        report(f"{name} fan-in, refit", {"efa": t})
    for c in curves:
        for p in nccl_check.point_errors(c):
            points.setdefault((c.id, p.nodes, p.nbytes), []).append(p)
nccl._tree = with_fan_in
print("\npoints that moved (without -> with):")
for (cid, nodes, nbytes), (a, b) in points.items():
    if abs(a.error - b.error) > 1e-9:
        print(f"  {cid} {nodes} nodes {nbytes >> 20} MiB: {a.error:+.1%} -> {b.error:+.1%} ({b.algo}/{b.proto})")
