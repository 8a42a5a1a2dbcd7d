"""The paper's bench routing (``routing = "multinomial"``, mkernel.routing): seeded, topk distinct experts
per token, expert popularity following one uniform weight per expert, drawn over the whole cluster, and
run whole (data mode) like any other routing; the paper check's MoE points name it."""
from __future__ import annotations

import dataclasses

import numpy as np

from mkernel import Cluster, Workload, reference
from mkernel.builders import moe_dispatch_gemm as moe
from mkernel.reference import DATA_RTOL
from mkernel.routing import Routing, route
from mkernel.sim import SimBackend
from mkernel.studies import paper_check


def workload(seed: int = 7, m: int = 4096) -> Workload:
    return Workload(kernel="moe_dispatch_gemm", m=m, n=32, k=32, experts=64, topk=4, routing="multinomial",
                    routing_seed=seed)


def test_seeded_distinct_and_drawn_over_the_cluster():
    w = workload()
    a, b, other = route(w, 16, 8), route(w, 16, 8), route(workload(seed=8), 16, 8)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, other))
    for r in a:
        assert r.shape == (w.m // 16, w.topk) and all(len(set(t)) == w.topk for t in r.tolist())
    # not node-symmetric: node 1's tokens are not node 0's moved (what the shifted routings are)
    per_node = (w.experts // 16) * 8
    assert not all(np.array_equal((a[r] + per_node) % w.experts, a[r + 8]) for r in range(8))
    assert not moe.node_symmetric(w)


def test_expert_loads_follow_one_uniform_weight_per_expert():
    """The bench's torch.rand weights, then each token's experts in proportion (without replacement):
    an expert's count tracks its weight, so some GPUs take more rows than the mean, unlike uniform."""
    w = workload(m=16384)
    weights = np.random.default_rng(w.routing_seed).random(w.experts)  # the draw's first numbers
    counts = np.bincount(np.concatenate([r.ravel() for r in route(w, 16, 8)]), minlength=w.experts)
    assert np.corrcoef(weights, counts)[0, 1] > 0.95
    busiest = max(Routing(w, 2, 8).rows(d) for d in range(16)) / (w.m * w.topk / 16)
    flat = max(Routing(dataclasses.replace(w, routing="uniform"), 2, 8).rows(d) for d in range(16)) / (w.m * w.topk / 16)
    assert busiest > 1.1 > flat


def test_data_mode_matches_numpy_under_multinomial_routing():
    c = Cluster("t", 2, 2, transport="efa_srd")
    w = Workload(kernel="moe_dispatch_gemm", m=48 * c.world, n=40, k=32, experts=4 * c.world, topk=3,
                 routing="multinomial", routing_seed=3, tile_m=16, tile_n=32)
    inputs = moe.make_inputs(w, c, np.random.default_rng(5))
    expected = reference.expected(w, inputs, c.gpus_per_node)["Y"]
    for build in (moe.build, moe.build_baseline, moe.build_paper_baseline):
        s = build(w, c)
        out = SimBackend().run(s, c, inputs=inputs).outputs["Y"]
        for rank, (o, e) in enumerate(zip(out, expected)):
            assert reference.relative_error(o, e) <= DATA_RTOL, f"{s.variant} rank {rank}"


def test_the_paper_check_draws_moe_as_the_bench_does():
    figures, _ = paper_check.load()
    moe_points = [p for p in paper_check.points(figures) if p.kernel == "moe_dispatch_gemm"]
    assert moe_points and all(dict(p.shape)["routing"] == "multinomial"
                              and dict(p.shape)["routing_seed"] == p.size for p in moe_points)
    assert all("routing" not in dict(p.shape) for p in paper_check.points(figures) if p.kernel != "moe_dispatch_gemm")
