"""Builds of the first nodes alone (ScheduleBuilder.first_nodes) against full builds.

The sim runs such a schedule collapsed, trusting the builder's claim that every node runs
node 0's queues under the node shift. These tests make the claim fail loudly: for every
node-symmetric op and variant, the full schedule must be node-symmetric, and folding it must give
exactly the tasks the partial build gives (waits' counts included), and the same times.
"""
from __future__ import annotations

import dataclasses
import itertools

import pytest

from mkernel import builders, runner
from mkernel.builders._rail import ALGORITHMS
from mkernel.cluster import Cluster
from mkernel.problems import Workload
from mkernel.scenario import load_scenario
from mkernel.sim.backend import SimBackend
from mkernel.sim.collapse import collapse, is_node_symmetric

SHAPES = {"gemm_ar": dict(m=768, n=512, k=64), "gemm_rs": dict(m=1536, n=512, k=64),
          "ag_gemm": dict(m=1536, n=256, k=128), "ring_attention": dict(m=256, n=2, k=128, tile_m=128)}
CLUSTERS = [(3, 2), (2, 4)]


def _case(kernel: str, nodes: int, gpus: int, **options) -> tuple[Workload, Cluster]:
    sc = load_scenario("paper-ib-2x8")
    c = dataclasses.replace(sc.cluster, nodes=nodes, gpus_per_node=gpus)
    return dataclasses.replace(sc.workload, kernel=kernel, **SHAPES[kernel], **options), c


@pytest.mark.parametrize("kernel", sorted(SHAPES))
@pytest.mark.parametrize("nodes,gpus", CLUSTERS)
def test_first_node_build_equals_the_folded_full_build(kernel, nodes, gpus):
    algorithms = ALGORITHMS.get(kernel, ("direct",))
    for baseline, forward in itertools.product(("hierarchical", "ring"), algorithms):
        # one tile per chunk: the grouped algorithms get whole groups and a direct tail
        w, c = _case(kernel, nodes, gpus, baseline=baseline, internode=forward,
                     **(dict(chunk_tiles=1) if kernel == "gemm_ar" else {}))
        assert builders.node_symmetric(w, c)
        module = builders.get(kernel)
        for build in (module.build, module.build_baseline):
            full, part = build(w, c), build(w, c, first_nodes=1)
            full.validate()
            part.validate()
            assert part.first_nodes == 1 and {t.rank for t in part.tasks} == set(range(gpus))
            assert is_node_symmetric(full), (kernel, baseline, forward, build.__name__)
            assert collapse(full).tasks == collapse(part).tasks, (kernel, baseline, forward, build.__name__)


@pytest.mark.parametrize("kernel", ["gemm_rs", "ag_gemm"])
def test_first_node_run_times_equal_the_full_run(kernel):
    """The simulated times of a first-node run equal those of the full schedule's run."""
    w, c = _case(kernel, 3, 2)
    module = builders.get(kernel)
    for build in (module.build, module.build_baseline):
        full = SimBackend().run(build(w, c), c)
        part = SimBackend().run(build(w, c, first_nodes=1), c)
        assert part.metrics["collapsed"] and not full.metrics["collapsed"]
        assert part.time_s == pytest.approx(full.time_s, rel=1e-9)
        assert part.bytes_per_gpu["network"] == pytest.approx(full.bytes_per_gpu["network"])


def test_asymmetric_ops_are_always_built_whole():
    """MoE routes per token and causal attention masks per rank: both are built whole."""
    w, c = _case("ring_attention", 3, 2, causal=True)
    assert not builders.node_symmetric(w, c)
    assert not is_node_symmetric(builders.get("ring_attention").build(w, c))
    sc = load_scenario("paper-ib-2x8")
    moe = dataclasses.replace(sc.workload, kernel="moe_dispatch_gemm", m=1536, n=256, k=256, experts=24)
    assert not builders.node_symmetric(moe, dataclasses.replace(sc.cluster, nodes=3, gpus_per_node=2))


def test_a_collapsed_run_builds_the_first_node_only_and_refuses_data():
    sc = load_scenario("paper-ib-2x8")
    sc = dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, nodes=3, gpus_per_node=2),
                             workload=dataclasses.replace(sc.workload, m=768, n=512, k=64))
    fused, _ = runner.build(sc, folded=True)
    assert fused.first_nodes == 1
    result, _ = runner.run(sc, collapse=True)
    full, _ = runner.run(sc, collapse=False)
    assert result["time_s"] == pytest.approx(full["time_s"], rel=1e-9)
    from mkernel.errors import BackendUnavailable
    with pytest.raises(BackendUnavailable, match="first nodes only"):
        SimBackend().run(fused, sc.cluster, inputs={})


@pytest.mark.parametrize("kernel", sorted(SHAPES))
def test_a_leaf_group_fold_is_exact_on_an_oversubscribed_spine(kernel):
    """With leaf groups of 2 nodes (4:1 spine), a collapsed run simulates one whole group; its
    fused and baseline times equal the full run's, and the spine slows both down."""
    from mkernel.cluster import FabricSpec

    w, c = _case(kernel, 4, 2)
    grouped = dataclasses.replace(c, fabric=FabricSpec(nodes_per_leaf=2, oversubscription=4.0))
    assert grouped.fold_nodes == 2
    sc = dataclasses.replace(load_scenario("paper-ib-2x8"), cluster=grouped, workload=w)
    full, _ = runner.run(sc, collapse=False)
    folded, stats = runner.run(sc, collapse=True)
    assert stats.metrics["collapsed"]
    assert folded["time_s"] == pytest.approx(full["time_s"], rel=1e-9)
    assert folded["baseline"]["time_s"] == pytest.approx(full["baseline"]["time_s"], rel=1e-9)
    flat, _ = runner.run(dataclasses.replace(sc, cluster=c), collapse=True)
    assert folded["time_s"] > flat["time_s"] and folded["baseline"]["time_s"] > flat["baseline"]["time_s"]


@pytest.mark.parametrize("nodes,gpus", CLUSTERS)
def test_shifted_moe_routing_builds_for_the_first_node_exactly(nodes, gpus):
    sc = load_scenario("paper-ib-2x8")
    c = dataclasses.replace(sc.cluster, nodes=nodes, gpus_per_node=gpus)
    w = dataclasses.replace(sc.workload, kernel="moe_dispatch_gemm", m=96 * c.world, n=256, k=256,
                            experts=4 * c.world, routing="shifted")
    assert builders.node_symmetric(w, c)
    module = builders.get("moe_dispatch_gemm")
    for build in (module.build, module.build_baseline):
        full, part = build(w, c), build(w, c, first_nodes=1)
        full.validate()
        part.validate()
        assert is_node_symmetric(full), build.__name__
        assert collapse(full).tasks == collapse(part).tasks, build.__name__
    full = SimBackend().run(module.build(w, c), c)
    part = SimBackend().run(module.build(w, c, first_nodes=1), c)
    assert part.time_s == pytest.approx(full.time_s, rel=1e-9)


def test_moe_routing_drawn_per_rank_is_not_symmetric():
    sc = load_scenario("paper-ib-2x8")
    c = dataclasses.replace(sc.cluster, nodes=3, gpus_per_node=2)
    for routing in ("uniform", "zipf"):
        w = dataclasses.replace(sc.workload, kernel="moe_dispatch_gemm", m=96 * 6, n=256, k=256, experts=24,
                                routing=routing)
        assert not builders.node_symmetric(w, c)
        assert not is_node_symmetric(builders.get("moe_dispatch_gemm").build(w, c))


@pytest.mark.parametrize("internode,chunk_tiles", [("twoshot", 1), ("ring", 1), ("twoshot", 4)])
def test_gemm_ar_inter_node_algorithms_collapse_exactly(internode, chunk_tiles):
    """Grouped chunks (one tile each: two groups on 3 nodes) and a shared exchange (one chunk of 4
    tiles: 6 slots as 3 row pieces): node-symmetric, and the first-node run times the full run."""
    w, c = _case("gemm_ar", 3, 2, internode=internode, chunk_tiles=chunk_tiles)
    module = builders.get("gemm_ar")
    assert module.plan(w, c)[1:] == ((6, 0) if chunk_tiles == 1 else (0, 6))
    assert builders.node_symmetric(w, c) and is_node_symmetric(module.build(w, c))
    full = SimBackend().run(module.build(w, c), c)
    part = SimBackend().run(module.build(w, c, first_nodes=1), c)
    assert part.metrics["collapsed"] and part.time_s == pytest.approx(full.time_s, rel=1e-9)
    assert part.bytes_per_gpu["network"] == pytest.approx(full.bytes_per_gpu["network"])
