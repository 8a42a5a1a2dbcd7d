"""The time breakdown (compute / exposed communication) of each op on the default scenario (ring
attention and MoE at smaller shapes), collapsed, every node, and every node without hazard tracking:
the figure commit 52b6207 (every op on the compute role counts as computing) corrects, and the
simulated times of every-node runs, tracked (on groups now, on the expansion before) and not. Run from a checkout's root, with that checkout's venv; prints one JSON row per run."""
import dataclasses
import json

from mkernel import runner
from mkernel.scenario import load_scenario

SHAPES = {"ring_attention": dict(m=2048, n=8, k=128), "moe_dispatch_gemm": dict(m=2048, n=1024, k=512, experts=16, topk=2)}
for kernel in ("gemm_ar", "gemm_rs", "ag_gemm", "ring_attention", "moe_dispatch_gemm"):
    sc = load_scenario("default")
    sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel=kernel, **SHAPES.get(kernel, {})))
    for collapse, hazards in ((True, None), (False, None), (False, False)):
        result, _ = runner.run(sc, collapse=collapse, hazards=hazards)
        print(json.dumps({"kernel": kernel, "collapse": collapse, "hazards": hazards, "fused_us": result["time_s"] * 1e6,
                          "baseline_us": result["baseline"]["time_s"] * 1e6, "breakdown": result["breakdown"],
                          "baseline_breakdown": result["baseline"].get("breakdown")}))
