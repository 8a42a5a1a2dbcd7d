"""Build and validate CPU of every op's fused and baseline grouped builds, 2 x 8, moderate shapes."""
import dataclasses, json, time
import mkernel
from mkernel import builders, ir
from mkernel.scenario import load_scenario
cases = [("paper-efa-2x8", dict(kernel="ring_attention", m=3072, n=16, k=128, tile_m=256)),
         ("paper-efa-2x8", dict(kernel="ring_attention", m=3072, n=16, k=128, tile_m=256, causal=1)),
         ("paper-ib-2x8", dict(kernel="gemm_rs", m=16384, n=16384, k=2048)),
         ("paper-ib-2x8", dict(kernel="gemm_rs", m=16384, n=16384, k=2048, baseline="ring")),
         ("paper-ib-2x8", dict(kernel="ag_gemm", m=16384, n=16384, k=2048)),
         ("paper-ib-2x8", dict(kernel="gemm_ar", m=16384, n=16384, k=2048, baseline="ring")),
         ("paper-ib-2x8", dict(kernel="gemm_ar", m=16384, n=16384, k=2048, internode="twoshot")),
         ("paper-ib-2x8", dict(kernel="moe_dispatch_gemm", m=16384, n=4096, k=2048))]
out = {"mkernel": mkernel.__file__}
tot = [0.0, 0.0]
for spec, wk in cases:
    sc = load_scenario(spec)
    w = dataclasses.replace(sc.workload, **wk)
    m = builders.get(w.kernel)
    with ir.paused_gc():
        for name, build in (("fused", m.build), ("baseline", m.build_baseline)):
            a = time.process_time(); s = build(w, sc.cluster, grouped=True); b = time.process_time()
            s.validate(races=True); c = time.process_time()
            tot[0] += b - a; tot[1] += c - b
            out[f"{w.kernel} {','.join(f'{k}={v}' for k, v in wk.items() if k != 'kernel')} {name} ({len(s.tasks)})"] = (round(b - a, 2), round(c - b, 2))
out["total build, validate"] = [round(x, 2) for x in tot]
print(json.dumps(out, indent=0))
