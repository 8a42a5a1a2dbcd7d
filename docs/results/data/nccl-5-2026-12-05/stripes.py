"""nccl-5: aws-ofi-nccl rail striping as a cost per rail write. Needs stripe_switches.diff applied:
    git apply docs/results/data/nccl-5-2026-12-05/stripe_switches.diff && python docs/results/data/nccl-5-2026-12-05/stripes.py [S1 S2 ...]"""
import sys
from mkernel import nccl
from mkernel.studies import nccl_check as nc
curves = nc.load()
CURVES = ("p5-ar-2n", "p5-ag-scale", "p5-ar-scale", "p5-a2a-scale")
V = {"S1 ring+tree": dict(ring=True, tree=True, p2p=False), "S2 p2p": dict(ring=False, tree=False, p2p=True),
     "S3 all": dict(ring=True, tree=True, p2p=True), "S4 ring": dict(ring=True, tree=False, p2p=False)}
for name, v in V.items():
    if sys.argv[1:] and not any(name.startswith(a) for a in sys.argv[1:]): continue
    nccl.STRIPE.update(v)
    for label, terms in (("committed", None), ("refit", "fit")):
        if terms: terms = {"efa": nc.fit("efa", curves)}
        s = nc.split(curves, terms); rows = {r["curve"]: r for r in nc.summary(curves, terms)}
        met = sum(r["goal_met"] for r in rows.values()); t = (terms or {}).get("efa")
        tt = f" [eff {t.net_efficiency:.3f} msg {t.net_message_us:g} hop {t.net_hop_us:g} a2a {t.a2a_efficiency:.3f}/{t.a2a_base_us:g}/{t.a2a_peer_us:g}/{t.a2a_message_us:g} nvls {t.nvls_efficiency:.3f}]" if t else ""
        print(f"| {name} | {label}{tt} | {s['fitted'][1]:.1%} | {s['held out'][1]:.1%} | {met} | " + " | ".join(
            f"{rows[c]['mean_abs_error']:.1%} / {rows[c]['worst'].error:+.1%}" for c in CURVES) + " |", flush=True)
