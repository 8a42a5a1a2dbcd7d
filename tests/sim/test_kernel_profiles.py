"""Kernel profiles (measured / reference) and the paper's MoE and attention baselines beside ours."""
from __future__ import annotations

import dataclasses

import pytest

from mkernel import runner
from mkernel.builders import moe_dispatch_gemm, ring_attention
from mkernel.cli import main
from mkernel.errors import ScenarioError
from mkernel.result import check_result
from mkernel.scenario import load_scenario, parse


def _scenario(kernel: str, kernels: str = "measured", **shape):
    sc = load_scenario("paper-ib-2x8")
    return dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, kernels=kernels),
                               workload=dataclasses.replace(sc.workload, kernel=kernel, **shape))


def test_reference_puts_the_compute_roles_at_library_speed():
    c = load_scenario("paper-ib-2x8").cluster
    ref = dataclasses.replace(c, kernels="reference")
    fused, fused_ref = c.for_variant("fused").gpu, ref.for_variant("fused").gpu
    assert fused.fused_tile_us > 0 and fused_ref.fused_tile_us == 0
    assert fused_ref.matmul_tflops == pytest.approx(c.gpu.matmul_tflops)  # cuBLAS's rate
    assert fused_ref.attention_efficiency == pytest.approx(c.gpu.reference_attention_efficiency)
    base_ref = ref.for_variant("gemm+nccl_hier_ar").gpu
    assert base_ref.attention_efficiency == pytest.approx(c.gpu.reference_attention_efficiency)
    assert ref.for_variant("fused").gpu.fused_peer_task_us == fused.fused_peer_task_us  # communication: as measured
    assert ref.for_variant("fused").gpu.fused_call_us == fused.fused_call_us


def test_the_profile_is_chosen_by_scenario_and_recorded_in_results():
    small = dict(m=2048, n=2048, k=2048)  # compute-bound, so the tiles' speed shows
    measured, _ = runner.run(_scenario("gemm_rs", **small), collapse=True)
    reference, _ = runner.run(_scenario("gemm_rs", "reference", **small), collapse=True)
    assert measured["kernels"] == "measured" and reference["kernels"] == "reference"
    assert reference["time_s"] < measured["time_s"]  # no per-tile cost
    assert reference["baseline"]["time_s"] == pytest.approx(measured["baseline"]["time_s"])  # cuBLAS either way
    assert check_result(reference) == []


def test_a_bad_profile_name_is_one_clear_error():
    raw = {"cluster": {"nodes": 1, "gpus_per_node": 2, "kernels": "fast"}, "workload": {"kernel": "gemm_ar", "m": 64,
                                                                                       "n": 64, "k": 16}}
    with pytest.raises(ScenarioError, match="cluster.kernels.*measured, reference"):
        parse(raw, "x.toml")


def test_the_cli_takes_the_profile(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["run", "--kernels", "reference", "--nodes", "1", "--gpus-per-node", "2", "--m", "256", "--n", "256",
                 "--k", "32", "--json", str(out)]) == 0
    assert '"kernels": "reference"' in out.read_text()


def test_the_papers_moe_baseline_sends_every_copy_evenly_and_computes_densely():
    sc = _scenario("moe_dispatch_gemm", m=512, n=64, k=64, routing="shifted")
    w, c = sc.workload, sc.cluster
    ours, paper = moe_dispatch_gemm.build_baseline(w, c), moe_dispatch_gemm.build_paper_baseline(w, c)
    assert paper.variant == "nccl_even_a2a+dense_gemm" and ours.variant == "nccl_a2a+grouped_gemm"
    a2a_ours, a2a_paper = ours.launches[0].library, paper.launches[0].library
    assert a2a_paper.nbytes >= a2a_ours.nbytes  # a row per (token, expert) copy, padded to the largest pair
    gemm = paper.launches[1].library
    assert gemm.kind == "gemm" and gemm.shape == (c.world * a2a_paper.nbytes // (c.world * w.k * 2), w.n, w.k)
    assert ours.launches[1].library is None  # our grouped GEMM runs as its tiles


def test_both_moe_baselines_are_named_in_results_and_the_papers_is_checked_too():
    result, _ = runner.run(_scenario("moe_dispatch_gemm", m=512, n=64, k=64, routing="shifted",
                                     experts=32, topk=4), data=True)
    assert result["correct"] is True
    assert result["baseline"]["name"] == "nccl_a2a+grouped_gemm"
    assert result["paper_baseline"]["name"] == "nccl_even_a2a+dense_gemm"
    assert result["paper_baseline"]["speedup"] == pytest.approx(result["paper_baseline"]["time_s"] / result["time_s"])
    gemm, _ = runner.run(_scenario("gemm_ar", m=512, n=512, k=32), collapse=True)
    assert gemm["paper_baseline"]["name"] == gemm["baseline"]["name"]  # the paper's is NCCL + cuBLAS: ours


def test_the_papers_attention_baseline_attends_at_flash_attention_2s_speed_in_either_profile():
    c = load_scenario("paper-ib-2x8").cluster
    assert c.gpu.attention_efficiency < c.gpu.reference_attention_efficiency  # FA2 is the slower (344 vs 600 TFLOPS)
    for kernels in ("measured", "reference"):
        prof = dataclasses.replace(c, kernels=kernels)
        paper = prof.for_variant(ring_attention.PAPER_BASELINE).gpu
        assert paper.attention_efficiency == pytest.approx(c.gpu.attention_efficiency)
        ours = prof.for_variant("nccl_hier_ag_kv+attn").gpu
        assert ours.attention_efficiency == pytest.approx(
            c.gpu.reference_attention_efficiency if kernels == "reference" else c.gpu.attention_efficiency)
    shape = dict(m=1024, n=4, k=128, tile_m=256)  # tiles large enough to be compute-bound, so the rate shows
    result, _ = runner.run(_scenario("ring_attention", "reference", **shape), collapse=True)
    assert result["paper_baseline"]["name"] == "nccl_hier_ag_kv+fa2" == ring_attention.PAPER_BASELINE
    assert result["paper_baseline"]["time_s"] > result["baseline"]["time_s"]  # the same schedule, slower attention
    measured, _ = runner.run(_scenario("ring_attention", **shape), collapse=True)
    assert measured["paper_baseline"]["time_s"] == pytest.approx(measured["baseline"]["time_s"])
    assert measured["paper_baseline"]["time_s"] == pytest.approx(result["paper_baseline"]["time_s"])
