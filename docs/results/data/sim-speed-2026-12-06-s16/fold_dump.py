"""fold_locals of every op's fused and baseline builds (first node, grouped; causal attention too) on a few clusters,
as the repr hash of the folded tasks or the refusal: a change to the fold must leave each the same. usage: fold_dump.py OUT"""
import dataclasses, hashlib, sys
from mkernel import builders
from mkernel.scenario import load_scenario
from mkernel.sim.localfold import NotFoldable, fold_locals
sc = load_scenario("scenarios/paper-efa-2x8.toml")
shapes = {"gemm_ar": dict(m=2048, n=2048, k=256), "gemm_rs": dict(m=2048, n=2048, k=256), "ag_gemm": dict(m=2048, n=2048, k=256),
          "ring_attention": dict(m=1024, n=4, k=64), "moe_dispatch_gemm": None}
lines = []
for nodes, g in ((2, 4), (2, 8), (4, 2)):
    c = dataclasses.replace(sc.cluster, nodes=nodes, gpus_per_node=g)
    for kernel, shape in shapes.items():
        for extra in ({}, {"causal": True}) if kernel == "ring_attention" else ({},):
            w = dataclasses.replace(sc.workload, kernel=kernel, **(shape or {}), **extra)
            m = builders.get(kernel)
            for fn in ("build", "build_baseline"):
                try:
                    kw = {"library_tasks": False} if fn == "build_baseline" else {}
                    s = getattr(m, fn)(w, c, first_nodes=1, grouped=True, **kw)
                    f = fold_locals(s)
                    h = hashlib.sha256(repr(f.tasks).encode()).hexdigest()[:16] + f" {len(f.tasks)}"
                except (NotFoldable, ValueError) as e:
                    h = f"{type(e).__name__}: {e}"
                lines.append(f"{nodes}x{g} {kernel} {extra} {fn}: {h}")
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
print(len(lines))
