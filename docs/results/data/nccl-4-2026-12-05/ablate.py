"""Ablation of the nccl-4 mechanisms (docs/results/2026-12-05-nccl-4.md): each variant with e23ba12's EFA terms
and refitted (`nccl_check.fit`). Needs mkernel/nccl.py with ablation_switches.diff applied:
    git apply docs/results/data/nccl-4-2026-12-05/ablation_switches.diff && python docs/results/data/nccl-4-2026-12-05/ablate.py
"""
import sys, dataclasses
from mkernel import nccl
from mkernel.studies import nccl_check as nc
curves = nc.load()
base_efa = dataclasses.replace(nccl.TERMS["efa"], net_hop_us=40.6)  # e23ba12's EFA terms (ring_step_us per variant)
VARIANTS = {
  "A committed (e23ba12)": dict(FLUSH=2, CREDIT=0.0, BCAST=0.0, ring_step_us=6.5),
  "B tree bcast split": dict(FLUSH=2, CREDIT=0.0, BCAST=0.3, ring_step_us=6.5),
  "C ring credit, no flush, NCCL step": dict(FLUSH=1, CREDIT=1.0, BCAST=0.0, ring_step_us=0.0),
  "C' ring credit, no flush, step fitted": dict(FLUSH=1, CREDIT=1.0, BCAST=0.0, ring_step_us=6.5),
  "E = B + C": dict(FLUSH=1, CREDIT=1.0, BCAST=0.3, ring_step_us=0.0),
}
fit_terms = list(nc.FIT_TERMS["efa"])
for name, v in VARIANTS.items():
    if sys.argv[1:] and not any(name.startswith(a) for a in sys.argv[1:]): continue
    for k in ("FLUSH", "CREDIT", "BCAST"): setattr(nccl, k, v[k])
    nccl.TERMS["efa"] = dataclasses.replace(base_efa, ring_step_us=v["ring_step_us"])
    terms_fit = dict(nc.FIT_TERMS); terms_fit["efa"] = tuple(fit_terms + (["ring_step_us"] if v["ring_step_us"] else []))
    nc.FIT_TERMS = terms_fit
    for label, terms in (("committed terms", None), ("refit", "fit")):
        if terms: terms = {"efa": nc.fit("efa", curves)}
        s = nc.split(curves, terms); rows = {r["curve"]: r for r in nc.summary(curves, terms)}
        met = sum(r["goal_met"] for r in rows.values())
        t = (terms or {}).get("efa")
        tt = f" [eff {t.net_efficiency:.3f} msg {t.net_message_us:g} hop {t.net_hop_us:g} step {t.ring_step_us:g} nvls {t.nvls_efficiency:.3f}]" if t else ""
        print(f"| {name} | {label}{tt} | {s['fitted'][1]:.1%} | {s['held out'][1]:.1%} | {met} | " + " | ".join(
            f"{rows[c]['mean_abs_error']:.1%} / {rows[c]['worst'].error:+.1%}" for c in ("p5-ar-2n", "p5-ag-scale", "p5-ar-scale")) + " |", flush=True)
