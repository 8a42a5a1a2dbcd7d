"""Hash every ring attention build (fused, baseline, paper baseline; causal or not; 1x4, 2x4, 4x2 clusters; grouped
or flat; full, first nodes, local fold) as the repr of its tasks (values, not which objects are shared): a builder change must leave each the same.
usage: python ra_dump.py OUT.txt (PYTHONPATH = the tree)"""
import dataclasses, hashlib, pickle, sys
from mkernel import builders
from mkernel.cluster import Cluster
from mkernel.scenario import load_scenario
m = builders.get("ring_attention")
sc = load_scenario("scenarios/paper-efa-2x8.toml")
lines = []
for nodes, g in ((1, 4), (2, 4), (4, 2), (2, 8)):
    c = dataclasses.replace(sc.cluster, nodes=nodes, gpus_per_node=g) if hasattr(sc.cluster, "nodes") else None
    for causal in (False, True):
        w = dataclasses.replace(sc.workload, kernel="ring_attention", m=1024, n=4, k=64, causal=causal)
        for fn in ("build", "build_baseline", "build_paper_baseline"):
            for grouped in (True, False):
                for first, fold in ((0, False), (1, False), (1, True)):
                    if first and nodes == 1:
                        continue
                    try:
                        s = getattr(m, fn)(w, c, first_nodes=first, grouped=grouped, local_fold=fold)
                        h = hashlib.sha256(repr(s.tasks).encode()).hexdigest()[:16] + f" {len(s.tasks)}"
                    except Exception as e:  # (a combination a builder refuses: the refusal is compared too)
                        h = f"{type(e).__name__}: {e}"
                    lines.append(f"{nodes}x{g} causal={causal} {fn} grouped={grouped} first={first} fold={fold}: {h}")
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
print(len(lines), "builds")
