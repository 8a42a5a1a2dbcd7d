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


def _assert_folds_onto_the_first_node(w: Workload, c: Cluster, label=()) -> None:
    """Fused and baseline: both builds valid, the full one node-symmetric, and it folds onto the
    build of the first node alone, task for task."""
    assert builders.node_symmetric(w, c)
    module = builders.get(w.kernel)
    for build in (module.build, module.build_baseline):
        full, part = build(w, c), build(w, c, first_nodes=1)
        full.validate()
        part.validate()
        assert part.first_nodes == 1 and {t.rank for t in part.tasks} == set(range(c.gpus_per_node))
        assert is_node_symmetric(full), (*label, build.__name__)
        assert collapse(full).tasks == collapse(part).tasks, (*label, build.__name__)


def _assert_first_node_times_the_full_run(w: Workload, c: Cluster) -> None:
    """Fused and baseline: the first-node run is collapsed and times and counts network bytes as the
    full schedule's run does."""
    module = builders.get(w.kernel)
    for build in (module.build, module.build_baseline):
        full = SimBackend().run(build(w, c), c)
        part = SimBackend().run(build(w, c, first_nodes=1), c)
        assert part.metrics["collapsed"] and not full.metrics["collapsed"]
        assert part.time_s == pytest.approx(full.time_s, rel=1e-9), build.__name__
        assert part.bytes_per_gpu["network"] == pytest.approx(full.bytes_per_gpu["network"]), build.__name__


@pytest.mark.parametrize("kernel", sorted(SHAPES))
@pytest.mark.parametrize("nodes,gpus", CLUSTERS)
def test_first_node_build_equals_the_folded_full_build(kernel, nodes, gpus):
    algorithms = ALGORITHMS.get(kernel, ("direct",))
    for baseline, forward in itertools.product(("hierarchical", "ring"), algorithms):
        # one tile per chunk: the grouped algorithms get whole groups and a direct tail
        w, c = _case(kernel, nodes, gpus, baseline=baseline, internode=forward,
                     **(dict(chunk_tiles=1) if kernel == "gemm_ar" else {}))
        _assert_folds_onto_the_first_node(w, c, (kernel, baseline, forward))


@pytest.mark.parametrize("kernel", ["gemm_rs", "ag_gemm"])
def test_first_node_run_times_equal_the_full_run(kernel):
    """The simulated times of a first-node run equal those of the full schedule's run."""
    _assert_first_node_times_the_full_run(*_case(kernel, 3, 2))


CAUSAL = [dict(m=256, n=2, k=128, tile_m=128), dict(m=288, n=2, k=32, tile_m=96),  # whole and ragged KV tiles
          dict(m=40, n=2, k=32, tile_m=16)]  # ragged query tiles in each zigzag half


@pytest.mark.parametrize("shape", CAUSAL)
@pytest.mark.parametrize("nodes,gpus", CLUSTERS + [(4, 2)])
def test_causal_attention_builds_for_the_first_node_exactly(nodes, gpus, shape):
    """The zigzag's half blocks differ by rank only in where they sit, and paired counters give every
    rank the same norm waits: the full build is node-symmetric and folds onto the partial one."""
    w, c = _case("ring_attention", nodes, gpus, causal=1)
    _assert_folds_onto_the_first_node(dataclasses.replace(w, **shape), c)


@pytest.mark.parametrize("nodes,gpus", [(3, 2), (4, 1)])
def test_causal_attention_first_node_run_times_equal_the_full_run(nodes, gpus):
    _assert_first_node_times_the_full_run(*_case("ring_attention", nodes, gpus, causal=1))


def test_the_fold_keeps_what_costs_time():
    """A causal mask's presence and a gather's row count cost time (cost.attn_us, the gather's
    bytes): a schedule differing between nodes only in those is not node-symmetric; a mask's
    positions, which cost nothing, do not matter."""
    w, c = _case("ring_attention", 3, 2, causal=1)
    s = builders.get("ring_attention").build(w, c)
    masked = next(t for t in s.tasks if t.mask and t.rank == c.gpus_per_node)  # on node 1
    moved = dataclasses.replace(masked, mask=(masked.mask[0] + 1, masked.mask[1]))
    assert is_node_symmetric(dataclasses.replace(s, tasks=tuple(moved if t is masked else t for t in s.tasks)))
    dropped = dataclasses.replace(masked, mask=())
    assert not is_node_symmetric(dataclasses.replace(s, tasks=tuple(dropped if t is masked else t for t in s.tasks)))


def test_moe_routed_per_rank_is_always_built_whole():
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


@pytest.mark.parametrize("routing", ["shifted", "zipf_shifted"])
@pytest.mark.parametrize("nodes,gpus", CLUSTERS)
def test_shifted_moe_routing_builds_for_the_first_node_exactly(nodes, gpus, routing):
    sc = load_scenario("paper-ib-2x8")
    c = dataclasses.replace(sc.cluster, nodes=nodes, gpus_per_node=gpus)
    w = dataclasses.replace(sc.workload, kernel="moe_dispatch_gemm", m=96 * c.world, n=256, k=256,
                            experts=4 * c.world, routing=routing)
    _assert_folds_onto_the_first_node(w, c)
    _assert_first_node_times_the_full_run(w, c)


def test_shifted_zipf_routing_keeps_a_skew_every_node_shares():
    """zipf_shifted: node n's tokens are node 0's, n nodes' worth of experts on; the hot experts'
    GPUs take more rows than the others (as under Zipf, though less), the same on every node."""
    from mkernel.routing import Routing, route

    c = Cluster("t", 4, 4)
    w = Workload(kernel="moe_dispatch_gemm", m=64 * c.world, n=64, k=64, experts=4 * c.world, topk=4,
                 routing="zipf_shifted")
    routes = route(w, c.world, c.gpus_per_node)
    for r in range(c.world):
        assert (routes[r] == (routes[r % 4] + (r // 4) * 16) % w.experts).all()
    rows = [Routing(w, c.nodes, c.gpus_per_node).rows(d) for d in range(c.world)]
    assert rows == rows[:4] * 4  # every node's GPUs take node 0's loads
    assert max(rows) > 1.3 * sum(rows) / len(rows)
    uniform = [Routing(dataclasses.replace(w, routing="shifted"), c.nodes, c.gpus_per_node).rows(d)
               for d in range(c.world)]
    assert max(uniform) < max(rows)


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
