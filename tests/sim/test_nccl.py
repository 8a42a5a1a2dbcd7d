"""The NCCL model (mkernel/nccl.py): NCCL's choices, the published curves it is held to, and its
use as the baselines' collective time in the simulator."""
from __future__ import annotations

import dataclasses

import pytest

from mkernel import nccl, runner
from mkernel.studies import nccl_check
from mkernel.builders import gemm_ar
from mkernel.scenario import load_scenario
from mkernel.sim.library import call_us

IB2 = nccl.Fabric(2, 8, 370.0, 50.0, "ib")
MiB = 1 << 20


def test_nccl_picks_low_latency_protocols_for_small_calls_and_simple_for_large():
    small, large = nccl.estimate("all_reduce", 64 << 10, IB2), nccl.estimate("all_reduce", 4 << 30, IB2)
    assert small.proto in ("LL", "LL128") and large.proto == "Simple"
    assert small.time_us < 100 and large.time_us > 10_000


def test_an_efa_fabric_without_a_platform_reporting_a_latency_is_refused():
    """The EFA hop is a share of the plugin's reported latency: a platform that reports none would
    make it 0 without a word (the fabrics of scenarios name p5en: :func:`mkernel.nccl.fabric_of`)."""
    with pytest.raises(ValueError, match="does not report; one of: p5, p5en"):
        nccl.estimate("all_gather", 64 * MiB, nccl.Fabric(2, 8, 370.0, 50.0, "efa"))
    assert nccl.estimate("all_gather", 64 * MiB, nccl.Fabric(2, 8, 370.0, 50.0, "efa", platform="p5")).time_us > 0


def test_nvls_is_used_only_where_the_fabric_allows_it():
    off = {nccl.estimate("all_reduce", s, IB2).algo for s in (MiB, 64 * MiB, 4 << 30)}
    assert not off & {"nvls", "nvls_tree"}
    on = dataclasses.replace(IB2, nvls=True)
    assert nccl.estimate("all_reduce", 4 << 30, on).algo == "nvls_tree"
    assert nccl.algorithms("all_gather", on) == ("ring",) and nccl.algorithms("alltoall", on) == ("p2p",)


def test_bus_bandwidth_stays_below_every_link_it_crosses():
    """A ring over 2 nodes is held by the node's 8 NICs, alltoall by each GPU's own NIC (busbw
    counts the local 1/n, so 2 x 50 x 15/16 on 2 nodes), one node by NVLink."""
    for coll in ("all_reduce", "all_gather", "reduce_scatter"):
        e = nccl.estimate(coll, 8 << 30, IB2)
        assert e.busbw_gb_per_s <= 8 * 50.0 and e.busbw_gb_per_s <= 370 * 8 / 7 + 1e-9
    assert nccl.estimate("alltoall", 8 << 30, IB2).busbw_gb_per_s <= 2 * 50.0 * 15 / 16
    one = nccl.Fabric(1, 8, 370.0, 50.0)
    assert nccl.estimate("all_gather", 8 << 30, one).busbw_gb_per_s <= 370.0


def test_a_slower_network_and_an_oversubscribed_spine_cost_time():
    base = nccl.estimate("all_reduce", MiB * 512, nccl.Fabric(4, 8, 370.0, 50.0)).time_us
    assert nccl.estimate("all_reduce", MiB * 512, nccl.Fabric(4, 8, 370.0, 25.0)).time_us > base
    spine = nccl.Fabric(4, 8, 370.0, 50.0, nodes_per_leaf=2, oversubscription=4.0)
    assert nccl.estimate("all_reduce", MiB * 512, spine).time_us > base
    assert nccl.estimate("alltoall", MiB * 512, spine).time_us > nccl.estimate(
        "alltoall", MiB * 512, nccl.Fabric(4, 8, 370.0, 50.0)).time_us


def test_bad_collective_is_refused():
    with pytest.raises(ValueError, match="unknown collective"):
        nccl.estimate_algo("broadcast", MiB, IB2, "ring", "Simple")


# The published figures (scenarios/nccl/published.toml): the 10% goal where it is met, and for the
# rest the error docs/nccl-model.md reports, so a change that makes any curve worse fails here
# (p5-ar-scale's worst, held out, went +50% -> +59% with the 2026-12-05 refit and +61% with the nccl-4 refit,
# and p5-ar-2n's mean 8.4% -> 9.4% with the tree's broadcast split: docs/nccl-model.md says why; p5-ar-scale's
# mean 7.8% -> 7.2% with the tree's fan-in, docs/results/2026-12-05-nccl-6.md; ib-ag-4n's worst +84% -> -37% with
# NCCL's channel shrink and ib-ar-2n-nvls-on +19% -> +4% with IB's NVLS at NVLink's fitted rate,
# docs/results/2026-12-05-nccl-ib-curves.md).
MET = {"ib-ar-2n-nvls-off", "ib-ar-2n-nvls-on", "ib-ar-4n", "ib-ring-1n", "ib-a2a-2n", "ib-ar-32n"}
WORST = {"p5-ar-2n": 0.21, "p5-ar-1n": 0.13, "p5-ar-scale": 0.62, "p5-a2a-scale": 0.17, "p5-ag-scale": 0.14,
         "ib-ag-32n": 0.61, "own-h200x2-ag": 0.26, "own-h200x2-rs": 0.35,
         "own-h200x2-ar": 0.14, "ib-ag-4n": 0.38, "ib-ar-4n-curve": 0.45}
MEAN = {"p5-ar-2n": 0.095, "p5-ar-scale": 0.075, "p5-ag-scale": 0.05, "p5-a2a-scale": 0.05, "own-h200x2-ag": 0.15,
        "own-h200x2-rs": 0.19, "own-h200x2-ar": 0.09, "ib-ag-4n": 0.13, "ib-ar-4n-curve": 0.16}


def test_the_model_against_the_published_curves():
    rows = {r["curve"]: r for r in nccl_check.summary(nccl_check.load())}
    assert set(rows) == MET | set(WORST)
    for curve in MET:
        assert rows[curve]["max_abs_error"] <= nccl_check.GOAL, (curve, rows[curve]["worst"])
    for curve, bound in WORST.items():
        assert rows[curve]["max_abs_error"] <= bound, (curve, rows[curve]["worst"])
    for curve, bound in MEAN.items():
        assert rows[curve]["mean_abs_error"] <= bound, (curve, rows[curve]["mean_abs_error"])


def test_the_fit_does_not_move_far_from_the_committed_terms():
    curves = nccl_check.load()
    refit = nccl_check.fit("ib", curves, rounds=1)
    assert refit.net_efficiency == pytest.approx(nccl.TERMS["ib"].net_efficiency, abs=0.02)


def _ar(nodes: int = 2, **workload):
    sc = load_scenario("paper-ib-2x8")
    w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=1024, n=1024, k=64, **workload)
    return dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, nodes=nodes), workload=w)


def test_a_baseline_collective_lasts_the_nccl_call_it_stands_for():
    sc = _ar()
    base = gemm_ar.build_baseline(sc.workload, sc.cluster)
    call = base.launches[1].library
    assert call.kind == "all_reduce" and call.nbytes == 1024 * 1024 * 2
    result, _ = runner.run(sc, collapse=True)
    gemm_only = dataclasses.replace(base, launches=base.launches[:1],
                                    tasks=tuple(t for t in base.tasks if t.launch == 0))
    from mkernel.sim.backend import SimBackend

    alone = SimBackend().run(gemm_only, sc.cluster).time_s * 1e6
    c = sc.cluster.for_variant(base.variant)
    assert result["baseline"]["time_s"] * 1e6 == pytest.approx(alone + c.launch_us + call_us(call, c), rel=1e-6)
    assert result["collectives"] == "nccl"


def test_the_declared_rings_still_run_as_tasks_when_asked_and_in_data_runs():
    ir, _ = runner.run(_ar(collectives="ir"), collapse=True)
    model, _ = runner.run(_ar(), collapse=True)
    assert ir["baseline"]["time_s"] != pytest.approx(model["baseline"]["time_s"], rel=1e-3)
    data, _ = runner.run(_ar(), data=True)
    assert data["correct"] is True  # the rings moved the data
    assert data["baseline"]["time_s"] == pytest.approx(model["baseline"]["time_s"], rel=1e-9)  # timed as NCCL


def test_a_one_rank_collective_costs_nothing_and_asks_nccl_for_no_choice():
    """One GPU has no peer: every collective is free, and NCCL's choice (whose step count is 0 there)
    is not asked (a one-GPU AG+GEMM or ring attention run divided by zero in it)."""
    one = nccl.Fabric(1, 1, 370.0, 50.0, "ib")
    for coll in nccl.COLLECTIVES:
        est = nccl.estimate(coll, 64 * MiB, one)
        assert est.time_us == 0.0 and est.coll == coll
    sc = load_scenario("scenarios/h200-1x1.toml")
    for kernel in ("ag_gemm", "ring_attention"):
        w = dataclasses.replace(sc.workload, kernel=kernel, m=2048, n=2048, k=1024)
        result, _ = runner.run(dataclasses.replace(sc, workload=w))
        assert result["time_s"] > 0 and result["baseline"]["time_s"] > 0
