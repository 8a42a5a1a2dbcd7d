"""Collapsing node-symmetric schedules to one simulated node gives the full run's times exactly."""
from __future__ import annotations

import pytest

from mkernel import Cluster, Workload
from mkernel.builders import gemm_ar
from mkernel.sim import SimBackend
from mkernel.sim.collapse import is_node_symmetric

W = Workload(m=1024, n=1536, k=128)


@pytest.mark.parametrize("nodes,gpus,transport,notify", [
    (2, 2, "ib_rc", "auto"), (3, 2, "ib_rc", "auto"), (4, 4, "ibgda", "auto"), (5, 2, "ib_rc", "fence"),
    (2, 8, "ib_rc", "auto"), (3, 1, "efa_srd", "fence")])
def test_collapsed_equals_full(nodes, gpus, transport, notify):
    # SRD jitter is off here: the two runs draw it in a different order.
    c = Cluster("t", nodes, gpus, transport=transport, notify=notify)
    c = __import__("dataclasses").replace(c, nic=__import__("dataclasses").replace(c.nic, srd_jitter_us=0.0))
    s = gemm_ar.build(W, c)
    assert is_node_symmetric(s)
    full, col = SimBackend().run(s, c), SimBackend().run(s, c, collapse=True)
    assert col.metrics["collapsed"] and not full.metrics["collapsed"]
    assert col.time_s == full.time_s and col.per_rank_s == full.per_rank_s
    assert col.bytes_total == full.bytes_total and col.bytes_per_gpu == full.bytes_per_gpu
    assert col.events < full.events


@pytest.mark.parametrize("kernel", ["ring_attention", "moe_dispatch_gemm"])
@pytest.mark.parametrize("nodes,gpus,transport,notify", [
    (2, 2, "ib_rc", "auto"), (3, 2, "ib_rc", "auto"), (4, 1, "efa_srd", "auto"), (3, 2, "efa_srd", "fence"),
    (2, 4, "ibgda", "auto")])
def test_causal_attention_and_shifted_zipf_moe_collapse_exactly(kernel, nodes, gpus, transport, notify):
    """The zigzag's paired counters and the shifted Zipf draw make these node-symmetric: the fused
    and baseline schedules collapse, to the full run's times and bytes on every rank."""
    import dataclasses

    from mkernel import builders

    c = Cluster("t", nodes, gpus, transport=transport, notify=notify)
    c = dataclasses.replace(c, nic=dataclasses.replace(c.nic, srd_jitter_us=0.0))
    w = (Workload(kernel=kernel, m=96, n=2, k=32, tile_m=16, causal=1) if kernel == "ring_attention" else
         Workload(kernel=kernel, m=48 * c.world, n=40, k=32, experts=4 * c.world, topk=3, tile_m=16, tile_n=32,
                  routing="zipf_shifted"))
    module = builders.get(kernel)
    for s in (module.build(w, c), module.build_baseline(w, c)):
        assert is_node_symmetric(s), s.variant
        full, col = SimBackend().run(s, c), SimBackend().run(s, c, collapse=True)
        assert col.metrics["collapsed"] and not full.metrics["collapsed"]
        assert col.time_s == full.time_s and col.per_rank_s == full.per_rank_s, s.variant
        assert col.bytes_per_gpu == full.bytes_per_gpu and col.events < full.events


def test_asymmetric_schedules_run_in_full():
    c = Cluster("t", 3, 2)
    ring = gemm_ar.build_baseline(W, c)  # a ring: each node sits at another hop of each chunk
    assert not is_node_symmetric(ring)
    assert not SimBackend().run(ring, c, collapse=True).metrics["collapsed"]


def test_data_runs_are_never_collapsed():
    c = Cluster("t", 2, 2)
    s = gemm_ar.build(W, c)
    inputs = gemm_ar.make_inputs(W, c, __import__("numpy").random.default_rng(0))
    assert not SimBackend().run(s, c, inputs=inputs, collapse=True).metrics["collapsed"]


@pytest.mark.parametrize("flags,collapsed", [
    ([], True), (["--no-collapse"], False), (["--data"], False), (["--collapse"], True),
    (["--transport", "efa_srd", "--notify", "flag"], False), (["--nodes", "1"], False)])
def test_run_collapses_by_default_where_nothing_asks_for_every_node(tmp_path, flags, collapsed):
    """`mkernel run` simulates one node of a node-symmetric op unless data, a trace, faults or a
    racy protocol (SRD flags that may overtake data) asks for all; the result says which, and the
    times are the full run's."""
    import json

    from mkernel.cli import main

    out = tmp_path / "r.json"
    small = ["--nodes", "2", "--gpus-per-node", "2", "--m", "256", "--n", "512", "--k", "64"]
    main(["run", *small, *flags, "--json", str(out)])
    result = json.loads(out.read_text())
    assert result["collapsed"] is collapsed
    if flags == []:
        main(["run", *small, "--no-collapse", "--json", str(out)])
        full = json.loads(out.read_text())
        assert result["time_s"] == pytest.approx(full["time_s"], rel=1e-12)
        assert result["baseline"]["time_s"] == pytest.approx(full["baseline"]["time_s"], rel=1e-12)


def test_progress_hears_the_build_and_every_simulated_variant():
    from mkernel import load_scenario
    from mkernel.runner import run

    heard = []
    run(load_scenario("default"), progress=lambda stage, done, total: heard.append((stage, done, total)))
    stages = list(dict.fromkeys(stage for stage, _, _ in heard))
    assert stages[0] == "build" and stages[1] == "fused" and len(stages) == 3
    for stage in stages[1:]:
        last = [(d, t) for s, d, t in heard if s == stage][-1]
        assert last[0] == last[1] > 0
