"""Exactness of the put path: small runs over transports, notify modes, a tiny ring (credit waits), faults;
each run's time, events and metrics dumped as JSON (run in a tree, compare two dumps)."""
import dataclasses, json, sys
from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend
from mkernel.sim.faults import parse as parse_faults
out = {}
sim = SimBackend()
for scen in ("paper-ib-2x8", "paper-efa-2x8"):
    sc = load_scenario(scen)
    for kernel, shape in (("gemm_ar", dict(m=2048, n=2048, k=512)), ("ag_gemm", dict(m=2048, n=2048, k=512)),
                          ("gemm_rs", dict(m=2048, n=2048, k=512))):
        for transport in ("ib_rc", "efa_srd", "ibgda"):
            for notify in ("flag", "imm", "fence"):
                for depth in (2, 64):
                    c = dataclasses.replace(sc.cluster, nodes=2, gpus_per_node=2, transport=transport, notify=notify,
                                            proxy=dataclasses.replace(sc.cluster.proxy, queue_depth=depth))
                    w = dataclasses.replace(sc.workload, kernel=kernel, **shape)
                    try:
                        s = builders.get(kernel).build(w, c, grouped=True)
                    except Exception as e:
                        out[f"{scen} {kernel} {transport} {notify} {depth}"] = f"build: {e}"; continue
                    for faults in (None, "drop=0.05,seed=3"):
                        key = f"{scen} {kernel} {transport} {notify} {depth} {faults}"
                        try:
                            st = sim.run(s, c, seed=1, faults=parse_faults(faults) if faults else None)
                            out[key] = [st.time_s, st.events, json.loads(json.dumps(st.metrics, default=str)),
                                        [json.dumps(h, default=str, sort_keys=True) for h in st.hazards][:5], list(st.per_rank_s)]
                        except Exception as e:
                            out[key] = f"{type(e).__name__}: {e}"
json.dump(out, open(sys.argv[1], "w"), indent=0, sort_keys=True)
print(len(out), sum(isinstance(v, str) for v in out.values()))
