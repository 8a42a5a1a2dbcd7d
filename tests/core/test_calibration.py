"""Issue 8 without a GPU: fitting a profile, loading it into scenarios, the sim terms it sets, the
validation statistics, the bench's rank combination, and the calibration kernel's compile check.

The raw measurements here are synthetic, built so that each fit has a known answer."""
from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

import pytest

from mkernel.studies import accuracy, profile
from mkernel.cli import main
from mkernel.errors import InputError, ScenarioError
from mkernel.scenario import load_scenario, parse

DATA = Path(__file__).resolve().parents[2] / "docs" / "results" / "data" / "cal-2026-11-29"


def synthetic_raw(per_command=0.5, doorbell=3.0, sm_tflops=6.0) -> dict:
    tile = lambda bn: 2.0 * 128 * bn * 4096  # noqa: E731 - flops of one tile
    return {
        "meta": {"date": "2026-11-29", "gpu": "NVIDIA H200", "gpu_short": "H200", "sms": 132, "driver": "1",
                 "torch": "2", "commit": "c0ffee1", "command": "mkernel calibrate --out p.toml"},
        "matmul": {"shape": "8192x8192x8192", "cublas_tflops": 700.0, "ours_tflops": 630.0},
        "gemm_sms": [{"m": 4096, "n": 4096, "k": 4096, "bm": 128, "bn": bn, "sms": s, "tiles": t,
                      "waves": -(-t // s), "us": -(-t // s) * tile(bn) / (sm_tflops * 1e6 * (1.0 if bn == 256 else 0.81))}
                     for bn, t in ((256, 512), (128, 1024)) for s in (8, 16, 33, 66, 132)],
        "hbm": {"bytes": 1 << 30, "gb_per_s": 3000.0},
        "stream": [{"programs": p, "gb_per_s": 50.0 * p} for p in (1, 2, 4, 8, 132)],
        "attention": {"shape": "S=4096", "sdpa_tflops": 350.0, "fused_tflops": 280.0},
        "extra": {"h2d_gb_per_s": 55.0, "d2h_gb_per_s": 55.0},
        "proxy": {"batches": [{"batch": b, "cmds_per_s": 1e6 / (per_command + doorbell / b)} for b in (1, 2, 4, 8)],
                  "push_us": 1.0, "roundtrip_proxy_us": 3.5},
        "loopback": {"put_bytes": 1 << 20, "gb_per_s": 40.0, "small_cmds_per_s": 200_000.0, "roundtrip_put_us": 10.5},
    }


def test_fit_recovers_the_terms_the_synthetic_measurements_were_built_from():
    doc = profile.fit(synthetic_raw(per_command=0.5, doorbell=3.0, sm_tflops=6.0))
    gpu, prox = doc["gpu"], doc["proxy"]
    assert gpu["matmul_tflops"] == 700.0 and gpu["fused_gemm_efficiency"] == pytest.approx(0.9)
    assert gpu["sm_matmul_tflops"] == pytest.approx(6.0, rel=1e-3)
    assert gpu["full_tile_elems"] == pytest.approx(128 * 128 / 0.81 ** 2, abs=1)  # eff 0.81 = sqrt(16384 / full)
    assert gpu["hbm_gb_per_s"] == 6600.0  # the copy kernel on every SM beat torch's copy
    assert gpu["sm_stream_gb_per_s"] == 50.0
    assert gpu["attention_efficiency"] == pytest.approx(0.5) and gpu["fused_attention_efficiency"] == pytest.approx(0.8)
    assert prox["per_command_us"] == pytest.approx(0.5, abs=1e-3) and prox["doorbell_us"] == pytest.approx(3.0, abs=1e-3)
    assert doc["nic"]["gbit_per_s"] == 320.0 and doc["nic"]["latency_us"] == pytest.approx(7.0)


def test_every_parameter_has_provenance_and_measured_ones_name_their_run():
    doc = profile.fit(synthetic_raw())
    for table in ("gpu", "nic", "proxy"):
        for key in doc[table]:
            p = doc["provenance"][f"{table}.{key}"]
            assert p["how"] == "measured" and p["commit"] == "c0ffee1" and p["command"].startswith("mkernel calibrate")
            assert {"date", "gpu", "driver", "torch", "bench"} <= set(p)
    for key in profile.UNMEASURED:
        assert doc["provenance"][key]["how"] in ("datasheet", "estimate", "design")


def test_profile_toml_round_trips_through_tomllib(tmp_path):
    doc = profile.write(synthetic_raw(), tmp_path / "p.toml")
    back = tomllib.loads((tmp_path / "p.toml").read_text())
    assert back["gpu"] == doc["gpu"] and back["provenance"] == doc["provenance"] and back["extra"] == doc["extra"]


def synthetic_peer(sm_gb=40.0, port_gb=380.0, cost_us=2.0, latency_us=1.5) -> dict:
    """Peer measurements of a link with these terms: a message of b bytes on one block takes
    cost + b / (sm_gb GB/s), so half efficiency is at cost x rate."""
    return {"gpus": 2, "copy": [{"programs": p, "gb_per_s": min(port_gb, sm_gb * p), "checked": True}
                                for p in (1, 2, 4, 8, 16, 32, 66, 132)],
            "bidir": {"bytes": 1 << 28, "gb_per_s_each_way": 350.0, "checked": True},
            "messages": [{"bytes": b, "programs": 1, "count": 8, "us_per_message": cost_us + b / (sm_gb * 1e3),
                          "checked": True} for b in (4096, 65536, 1 << 20)],
            "pingpong": {"iters": 100, "one_way_us": latency_us}}


def test_peer_measurements_fit_the_nvlink_terms_and_merge_into_a_full_profile(tmp_path):
    path = tmp_path / "p.toml"
    full = profile.write(synthetic_raw(), path)
    assert full["provenance"]["nvlink.sm_copy_gb_per_s"]["how"] == "estimate"
    peer_only = {"meta": {**synthetic_raw()["meta"], "commit": "beef123"}, "peer": synthetic_peer()}
    nv = profile.fit(peer_only)["nvlink"]
    assert nv["bw_gb_per_s"] == 380.0 and nv["sm_copy_gb_per_s"] == 40.0 and nv["latency_us"] == 1.5
    assert nv["half_efficiency_bytes"] == pytest.approx(2.0 * 40e3, rel=1e-3)  # 2 us at 40 GB/s
    merged = profile.write(peer_only, path, merge=True)
    back = tomllib.loads(path.read_text())
    assert back == merged and back["gpu"] == full["gpu"] and back["proxy"] == full["proxy"]
    assert back["nvlink"] == nv and back["description"].startswith(full["description"] + " Updated by")
    assert back["provenance"]["nvlink.latency_us"]["commit"] == "beef123"
    assert back["provenance"]["gpu.sms"]["commit"] == "c0ffee1"


def test_a_one_gpu_run_merged_after_a_two_gpu_one_keeps_the_nvlink_records(tmp_path):
    """`mkernel calibrate --only proxy` on one GPU rewrote the NVLink terms' provenance measured on two
    as datasheet / estimate (2026-12-05): the values stayed, their record did not."""
    path = tmp_path / "p.toml"
    profile.write({"meta": synthetic_raw()["meta"], "peer": synthetic_peer()}, path)
    proxy_only = {key: synthetic_raw()[key] for key in ("proxy", "loopback")}
    proxy_only["meta"] = {**synthetic_raw()["meta"], "commit": "beef123"}
    back = profile.write(proxy_only, path, merge=True)
    assert back["nvlink"]["bw_gb_per_s"] == 380.0
    for key in ("nvlink.bw_gb_per_s", "nvlink.latency_us", "nvlink.sm_copy_gb_per_s", "nvlink.half_efficiency_bytes"):
        assert back["provenance"][key]["how"] == "measured" and back["provenance"][key]["commit"] == "c0ffee1"
    assert back["provenance"]["proxy.poll_us"]["commit"] == "beef123"
    assert back["provenance"]["proxy.batch"]["how"] == "design"


def test_each_merged_run_is_named_in_the_description_after_the_earlier_ones(tmp_path):
    """A merge named only the latest update: a proxy run merged after a peer run dropped the peer run
    from the description, though the profile kept the peer run's NVLink terms (2026-12-06)."""
    path = tmp_path / "p.toml"
    profile.write({"meta": synthetic_raw()["meta"], "peer": synthetic_peer()}, path)
    for commit, what in (("beef123", "--only peer"), ("f00d456", "--only proxy")):
        run = {key: synthetic_raw()[key] for key in ("proxy", "loopback")}
        run["meta"] = {**synthetic_raw()["meta"], "commit": commit, "command": f"mkernel calibrate {what}"}
        back = profile.write(run, path, merge=True)
    said = back["description"]
    assert said.startswith("Fitted by") and "commit c0ffee1" in said
    assert "--only peer" in said and "beef123" in said and "f00d456" in said
    assert said.index("--only peer") < said.index("--only proxy")


def test_batch_fit_is_least_squares_and_never_negative():
    assert profile.batch_fit([(1, 3.5), (2, 2.0), (4, 1.25), (8, 0.875)]) == pytest.approx((0.5, 3.0))
    assert profile.batch_fit([(1, 1.0), (8, 2.0)])[1] == 0.0  # rising with batch: no negative doorbell


def _scenario(tmp_path, cluster_extra: str = "", profile_text: str | None = None):
    (tmp_path / "p.toml").write_text(profile_text if profile_text is not None else
                                     profile.to_toml(profile.fit(synthetic_raw())))
    sc = tmp_path / "s.toml"
    sc.write_text(f'[cluster]\nnodes = 1\ngpus_per_node = 1\nhardware = "p.toml"\n{cluster_extra}\n'
                  '[workload]\nkernel = "gemm_ar"\nm = 1024\nn = 1024\nk = 1024\n')
    return load_scenario(str(sc))


def test_a_scenario_takes_the_profile_as_defaults_and_overrides_it(tmp_path):
    plain = _scenario(tmp_path)
    assert plain.cluster.gpu.matmul_tflops == 700.0 and plain.cluster.proxy.doorbell_us == pytest.approx(3.0, abs=1e-3)
    own = _scenario(tmp_path, "[cluster.gpu]\nmatmul_tflops = 500.0\n")
    assert own.cluster.gpu.matmul_tflops == 500.0 and own.cluster.gpu.sm_matmul_tflops == plain.cluster.gpu.sm_matmul_tflops


@pytest.mark.parametrize("text, says", [
    ('[gpu]\nmatmul_tflops = "fast"\n', "gpu.matmul_tflops"),
    ('[gpu]\nwarp_speed = 9\n', "unknown key 'gpu.warp_speed'"),
    ('[colour]\nx = 1\n', "unknown key 'colour'"),
])
def test_a_bad_profile_is_refused_naming_its_file_and_key(tmp_path, text, says):
    with pytest.raises(ScenarioError, match="p.toml") as exc:
        _scenario(tmp_path, profile_text=text)
    assert says in str(exc.value)


def test_a_missing_profile_names_the_key_and_the_bundled_ones():
    with pytest.raises(ScenarioError, match=r"cluster.hardware.*h200"):
        parse({"cluster": {"nodes": 1, "gpus_per_node": 1, "hardware": "no-such"},
               "workload": {"kernel": "gemm_ar", "m": 64, "n": 64, "k": 64}}, "x.toml")


def test_paper_scenarios_use_the_bundled_h200_profile():
    bundled = tomllib.loads((Path(__file__).resolve().parents[2] / "scenarios" / "hardware" / "h200.toml").read_text())
    for name in ("paper-ib-2x8", "paper-efa-2x8", "default"):
        c = load_scenario(name).cluster
        assert c.gpu.matmul_tflops == bundled["gpu"]["matmul_tflops"]
        assert c.gpu.sm_matmul_tflops == bundled["gpu"]["sm_matmul_tflops"]
        assert c.nic.gbit_per_s in (200.0, 400.0)  # their own NICs, not the loopback's


def test_fewer_busy_sms_compute_faster_each_and_fused_tiles_run_at_their_measured_share():
    from mkernel import cost

    c = _cluster(sm=6.0, matmul=660.0)
    assert cost.sm_speed(c, 132) == 1.0 and cost.sm_speed(c, 8) == pytest.approx(6.0 / 5.0)
    assert cost.sm_speed(c, 120) == pytest.approx(132 / 120)  # capped by the whole GPU's rate
    fused = c.for_variant("fused").gpu
    assert fused.matmul_tflops == pytest.approx(660.0 * 0.9) and fused.fused_gemm_efficiency == 1.0


def _cluster(sm: float, matmul: float):
    import dataclasses

    from mkernel.cluster import Cluster

    c = Cluster("t", 1, 1)
    return dataclasses.replace(c, gpu=dataclasses.replace(c.gpu, matmul_tflops=matmul, sm_matmul_tflops=sm,
                                                          fused_gemm_efficiency=0.9))


def test_the_gemm_model_shows_wave_quantisation():
    c = _cluster(sm=0.0, matmul=660.0)
    t = {s: accuracy._sim_us(accuracy.gemm_schedule(4096, 4096, 4096, 128, 256, s), c) for s in (100, 128, 132)}
    assert t[100] / t[132] == pytest.approx(6 / 4, rel=0.02)  # 512 tiles: 6 waves against 4
    assert t[128] == pytest.approx(t[132], rel=0.02)  # 4 waves either way


def test_summary_statistics():
    rows = [{"group": "a", "config": str(i), "measured_us": 100.0, "predicted_us": p}
            for i, p in enumerate((90.0, 100.0, 110.0, 130.0))]
    rep = accuracy.summarise(rows)
    assert rep["overall"]["mape"] == pytest.approx((0.1 + 0 + 0.1 + 0.3) / 4)
    assert rep["overall"]["p90"] == pytest.approx(0.3)
    assert accuracy.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert accuracy.spearman([1, 2, 3, 4], [40, 30, 20, 10]) == pytest.approx(-1.0)


def test_accuracy_on_the_committed_h200_measurements(tmp_path, capsys):
    out = tmp_path / "v.json"
    runs = [str(DATA / f"{k}.json") for k in ("gemm_ar", "gemm_rs", "ag_gemm", "ring_attention")]
    assert main(["accuracy", "--calibration", str(DATA / "calibration.json"), "--bench",
                 str(DATA / "bench-world1.json"), "--runs", *runs, "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert set(report["groups"]) == {"compute-role", "proxy", "world-1", "emulated"}
    assert report["groups"]["compute-role"]["mape"] < 0.10  # the recorded result (docs/results)
    assert all(math.isfinite(r["error"]) for r in report["rows"])
    assert "largest error term" in capsys.readouterr().out


def test_accuracy_refuses_files_that_are_not_measurements(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text('{"rows": []}')
    assert main(["accuracy", "--calibration", str(bad)]) == 2
    assert "gemm_sms" in capsys.readouterr().err


def test_validate_is_accuracys_old_name_and_says_it_is_deprecated(capsys):
    bench = ["--calibration", str(DATA / "calibration.json"), "--bench", str(DATA / "bench-world1.json")]
    assert main(["accuracy", *bench]) == 0
    new = capsys.readouterr()
    assert main(["validate", *bench]) == 0
    old = capsys.readouterr()
    assert old.out == new.out and "deprecated" not in new.err
    assert "`mkernel validate` is deprecated" in old.err and "mkernel accuracy" in old.err


def test_bench_combines_ranks_by_the_slowest_and_reports_ratios():
    from mkernel.hw.measure import bench  # torch-free at import: the ranks import torch

    def rank(fused, base):
        return [{"kernel": "gemm_ar", "size": 2048, "shape": {}, "flops_per_gpu": 1e12,
                 "impls": {"fused": {"s": fused, "graph_s": fused, "rel_err": 1e-3, "ok": True},
                           "nccl+matmul": {"s": base, "graph_s": base, "rel_err": 1e-3, "ok": True},
                           "symm_mem": {"unavailable": "why"}}}]

    row = bench.combine([rank(1.0, 3.0), rank(2.0, 3.0)])[0]
    assert row["impls"]["fused"]["s"] == 2.0 and row["impls"]["fused"]["tflops_per_gpu"] == 0.5
    assert row["impls"]["nccl+matmul"]["fused_speedup"] == 1.5 and row["impls"]["symm_mem"] == {"unavailable": "why"}
    assert row["impls"]["nccl+matmul"]["graph_fused_speedup"] == 1.5
    assert bench.table({"rows": [row]})[1].split()[:3] == ["gemm_ar", "2048", "0.5"]


def test_calibration_copy_kernel_compiles_for_sm90():
    triton = pytest.importorskip("triton", reason="triton is not installed (pip install 'mkernel[test]')")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from mkernel.hw.measure import calibrate

    sig, const = calibrate.COPY_SIGNATURE
    k = triton.compile(ASTSource(fn=calibrate.copy_kernel, signature=sig, constexprs=const),
                       target=GPUTarget("cuda", 90, 32))
    assert ".target sm_90a" in k.asm["ptx"] and len(k.asm["cubin"]) > 1000


@pytest.mark.parametrize("name", ["peer_copy_kernel", "message_kernel", "pingpong_kernel"])
def test_nvlink_calibration_kernels_compile_for_sm90a(name):
    triton = pytest.importorskip("triton", reason="triton is not installed (pip install 'mkernel[test]')")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from mkernel.hw.measure import peer

    sig, const = {"peer_copy_kernel": ({"src": "*i64", "dst_addr": "i64", "n": "i32"},
                                       {"BLOCK": peer.BLOCK, "NUM_PROGRAMS": 8}),
                  "message_kernel": ({"src": "*i64", "dst_addr": "i64", "flag_addr": "i64", "words": "i32",
                                      "count": "i32"}, {"BLOCK": peer.BLOCK}),
                  "pingpong_kernel": ({"my_flag_addr": "i64", "peer_flag_addr": "i64", "iters": "i32",
                                       "timeout_ns": "i64", "done": "*i64"}, {"FIRST": True})}[name]
    k = triton.compile(ASTSource(fn=getattr(peer, name), signature=sig, constexprs=const),
                       target=GPUTarget("cuda", 90, 32))
    ptx = k.asm["ptx"]
    assert ".target sm_90a" in ptx and len(k.asm["cubin"]) > 1000
    assert ("st.release.sys" in ptx) == (name != "peer_copy_kernel")


def test_the_interpreter_costs_fall_on_fused_schedules_only_and_the_fit_recovers_them():
    """A world-1 bench built from known per-call and per-tile costs: the fit returns them; baselines
    and calibrate's stand-alone GEMM never pay them."""
    import dataclasses

    from mkernel import builders
    from mkernel.problems import Workload
    from mkernel.sim.backend import SimBackend

    c = accuracy.profile_cluster("h200", 1, 1)
    plain = dataclasses.replace(c, gpu=dataclasses.replace(c.gpu, fused_call_us=0.0, fused_tile_us=0.0))
    known = dataclasses.replace(c, gpu=dataclasses.replace(c.gpu, fused_call_us=12.0, fused_tile_us=2.5))
    rows = []
    for kernel, m in (("gemm_ar", 2048), ("gemm_rs", 4096), ("gemm_ar", 8192)):
        shape = dict(m=m, n=m, k=m // 16)
        w = Workload(kernel=kernel, **shape)
        module = builders.get(kernel)
        t = SimBackend().run(module.build(w, known), known).time_s
        rows.append({"kernel": kernel, "size": m, "shape": shape, "impls": {"fused": {"s": t, "graph_s": t}}})
        base = module.build_baseline(w, c)
        assert SimBackend().run(base, known).time_s == SimBackend().run(base, plain).time_s
    call, tile = accuracy.fit_overheads({"rows": rows}, c)
    assert call == pytest.approx(12.0, abs=0.05) and tile == pytest.approx(2.5, abs=0.01)
    gemm = accuracy.gemm_schedule(1024, 1024, 1024, 128, 256, 16)
    assert SimBackend().run(gemm, known).time_s == SimBackend().run(gemm, plain).time_s


def test_the_copy_costs_are_recovered_from_splits_the_model_made_and_the_split_order_reported(tmp_path):
    """Splits "measured" by the simulator itself with known copy terms (25 GB/s per SM, 0.5 us per
    peer step, 0.3 us per local step, 4 us per peer task): the fit picks the rate from its grid and
    recovers the three costs (within 15%: the fit charges work per SM on the busiest rank, the
    simulator the critical path), and validate, with the profile's own costs, predicts them closely
    and orders the splits as measured."""
    import dataclasses

    from mkernel import builders
    from mkernel.ir import Role
    from mkernel.problems import Workload

    c = accuracy.profile_cluster("h200", 1, 2)
    truth = dataclasses.replace(c, gpu=dataclasses.replace(c.gpu, fused_sm_copy_gb_per_s=25.0, fused_peer_task_us=4.0,
                                                         fused_peer_step_us=0.5, fused_local_step_us=0.3))
    rows = []
    for kernel, shape in (("gemm_ar", dict(m=4096, n=4096, k=64)), ("ag_gemm", dict(m=4096, n=256, k=4096)),
                          ("moe_dispatch_gemm", dict(m=4096, n=256, k=2048, experts=8, topk=2))):
        times = {}
        for n in (2, 4, 8):
            w = Workload(kernel=kernel, **shape, sms=((Role.INTRA, n),))
            times[str(n)] = {"s": accuracy._sim_us(builders.get(kernel).build(w, truth), truth) * 1e-6}
        rows.append({"kernel": kernel, "size": shape["m"], "shape": shape, "splits": times})
    splits = {"world": 2, "rows": rows}
    fit = accuracy.fit_peer_costs(splits, c, rates=(16.0, 25.0, 40.0))
    assert fit["gpu.fused_sm_copy_gb_per_s"] == 25.0, fit
    assert fit["gpu.fused_peer_task_us"] == pytest.approx(4.0, rel=0.15), fit
    assert fit["gpu.fused_peer_step_us"] == pytest.approx(0.5, rel=0.15), fit
    assert fit["gpu.fused_local_step_us"] == pytest.approx(0.3, rel=0.15), fit
    text = (Path(profile.__file__).parents[2] / "scenarios/hardware/h200.toml").read_text()
    for key, value in fit.items():  # the bundled profile with the fitted terms
        table, name = key.split(".")
        head = text.index(f"[{table}]")
        at = text.index(f"\n{name} = ", head) + 1
        text = text[:at] + f"{name} = {value}" + text[text.index("\n", at):]
    (tmp_path / "fitted.toml").write_text(text)
    calibration = ("cal", json.loads((DATA / "calibration.json").read_text()))
    report = accuracy.measure_error(str(tmp_path / "fitted.toml"), calibration, splits=[("splits.json", splits)])
    ours = [r for r in report["rows"] if r["group"] == "splits world-2"]
    assert len(ours) == 9 and all(abs(r["error"]) < 0.05 for r in ours), [r["error"] for r in ours]
    for curve in report["curves"]:
        assert curve["spearman"] == pytest.approx(1.0) and curve["sim_pick_over_best"] == 1.0
    with pytest.raises(InputError, match="not a splits.json"):
        accuracy.measure_error("h200", ("cal", json.loads((DATA / "calibration.json").read_text())), splits=[("x", {})])
