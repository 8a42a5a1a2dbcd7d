"""Simulated times of gemm_ar runs in the modes that take SMs one by one (trace, adaptive controller) and
data mode, on the 2 x 8 paper-ib cluster: printed as repr digits, to compare two codes."""
import dataclasses, json
from mkernel import runner
from mkernel.scenario import load_scenario
sc = load_scenario("scenarios/paper-ib-2x8.toml")
out = {}
for m, k in ((4096, 1024), (8192, 2048)):
    s = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel="gemm_ar", m=m, n=m, k=k))
    for name, kw in (("trace", dict(trace=True)), ("adaptive", dict(adaptive=True, collapse=False)),
                     ("uncollapsed", dict(collapse=False)), ("collapsed", dict(collapse=True)),
                     ("stress-free data", dict(data=True)) if m == 4096 else ("skip", None)):
        if kw is None:
            continue
        r, st = runner.run(s, **kw)
        out[f"{m}/{name}"] = [repr(r["time_s"]), repr(r["baseline"]["time_s"]), r["events"], len(st.hazards)]
print(json.dumps(out, indent=0))
