"""mkernel sweep: the reference grid's shapes, a small resumable run, its table and plot; options,
worker processes, failed points, the scale-out scenarios and the study grid."""
from __future__ import annotations

import importlib.util
import json

import pytest

from mkernel.studies import scaleout, study
from mkernel.cli import main
from mkernel.errors import InputError
from mkernel.scenario import bundled_scenarios, load_scenario
from mkernel.studies.sweep import Point, apply_options, parse_options, reference_grid, run_grid, scenario_of


def test_reference_grid_is_design_section_8():
    grid = reference_grid(testbeds=("paper-ib-2x8",))
    by = {(p.kernel, p.size): dict(p.shape) for p in grid}
    assert len(grid) == 25  # five ops, five sizes
    assert by[("ag_gemm", 8192)] == dict(m=8192, n=512, k=8192)
    assert by[("gemm_rs", 32768)] == dict(m=32768, n=32768, k=2048)
    assert by[("ring_attention", 768)]["m"] == 768 and by[("ring_attention", 768)]["n"] == 64


def test_small_sweep_writes_rows_resumes_and_plots(tmp_path, capsys):
    argv = ["sweep", "--out", str(tmp_path), "--sizes", "1", "--testbeds", "paper-efa-2x8",
            "--kernels", "gemm_rs", "ag_gemm"]
    assert main(argv) == 0
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert sorted(r["kernel"] for r in rows) == ["ag_gemm", "gemm_rs"]
    assert all(r["speedup"] > 0 and r["fused_us"] > 0 for r in rows)
    (tmp_path / "results.jsonl").write_text(json.dumps(rows[0]) + "\n")  # as if interrupted after one point
    assert main(argv) == 0
    again = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(again) == 2 and again[0] == rows[0]  # the finished point was not run again
    header = (tmp_path / "results.csv").read_text().splitlines()[0]
    assert header.startswith("key,testbed,kernel,size,m,n,k,nodes,gpus_per_node,transport,options,fused_us")
    assert len(json.loads((tmp_path / "results.json").read_text())) == 2
    assert (tmp_path / "speedup.png").exists() or "plot skipped" in capsys.readouterr().out


def test_options_expand_to_every_combination_and_reach_the_scenario():
    combos = parse_options(["proxy.batch=1,8", "transport=ib_rc,efa_srd", "fabric.oversubscription=2"])
    assert len(combos) == 4 and (("proxy.batch", 1), ("transport", "efa_srd"), ("fabric.oversubscription", 2)) in combos
    sc = apply_options(load_scenario("paper-ib-2x8"), (("proxy.batch", 1), ("internode", "ring"),
                                                       ("fabric.oversubscription", 2), ("nic.gbit_per_s", 800)), "t")
    assert sc.cluster.proxy.batch == 1 and sc.workload.internode == "ring"
    assert sc.cluster.fabric.oversubscription == 2.0 and sc.cluster.nic.gbit_per_s == 800.0


@pytest.mark.parametrize("spec,match", [("proxy.batchh=1", "unknown option 'proxy.batchh'"),
                                        ("colour=red", "unknown option 'colour'"),
                                        ("transport=carrier_pigeon", "transport"),
                                        ("proxy.batch=many", "must be int"),
                                        ("proxy.batch=0", "integer >= 1"),
                                        ("nic.gbit_per_s=-5", "finite number > 0"),
                                        ("controller=magic", "allowed: static, adaptive")])
def test_a_bad_option_is_one_clear_error_before_any_run(spec, match, tmp_path):
    point = Point("paper-ib-2x8", "gemm_ar", 2048, (("m", 2048), ("n", 2048), ("k", 128)), parse_options([spec])[0])
    with pytest.raises(InputError, match=match):
        run_grid([point], tmp_path)
    assert not (tmp_path / "results.jsonl").exists()  # nothing ran


def test_workers_give_the_rows_one_process_gives(tmp_path):
    points = [Point("paper-ib-2x8", "gemm_rs", m, (("m", m), ("n", m), ("k", 128)), opts)
              for m in (2048, 4096) for opts in parse_options(["proxy.batch=1,8"])]
    serial = {r["key"]: r for r in run_grid(points, tmp_path / "one")}
    parallel = {r["key"]: r for r in run_grid(points, tmp_path / "two", workers=2)}
    assert serial.keys() == parallel.keys() and len(serial) == 4
    for key, row in serial.items():
        assert parallel[key]["fused_us"] == row["fused_us"] and parallel[key]["speedup"] == row["speedup"]
    assert len((tmp_path / "two" / "results.jsonl").read_text().splitlines()) == 4


def test_a_failed_point_is_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch):
    from mkernel import runner
    from mkernel.errors import DeadlockError

    real = runner.run

    def flaky(sc, **kw):
        if sc.workload.m == 4096:
            raise DeadlockError("rank 3 role recv waits on arrived[2] (have 0 of 1), epoch 1")
        return real(sc, **kw)

    monkeypatch.setattr(runner, "run", flaky)
    points = [Point("paper-ib-2x8", "gemm_ar", m, (("m", m), ("n", m), ("k", 128))) for m in (2048, 4096)]
    rows = {r["size"]: r for r in run_grid(points, tmp_path)}
    assert "error" in rows[4096] and "arrived[2]" in rows[4096]["error"] and rows[2048]["speedup"] > 0


def test_scaleout_scenarios_are_bundled_load_and_match_the_generator(tmp_path):
    names = scaleout.scenarios()
    assert len(names) == 2 * 2 * 2 * 6 + 3
    assert {f"scaleout/{n}" for n in names} <= set(bundled_scenarios())
    for path in scaleout.write(tmp_path):  # the committed files are what the generator writes
        bundled = load_scenario(f"scaleout/{path.stem}")
        assert bundled.cluster == load_scenario(str(path)).cluster
    big = load_scenario("scaleout/efa-800g-2to1-64x8").cluster
    assert (big.nodes, big.transport, big.nic.count * big.nic.gbit_per_s) == (64, "efa_srd", 800.0)
    assert big.fabric.oversubscription == 2.0 and big.fold_nodes == 2
    gb = load_scenario("scaleout/gb200-nvl72-800g-4x72").cluster
    assert gb.gpus_per_node == 72 and gb.nvlink.bw_gb_per_s == 900.0


def test_the_study_grid_is_a_thousand_valid_points():
    grid = study.grid()
    assert len(grid) >= 1000 and len({p.key for p in grid}) == len(grid)
    assert max(load_scenario(p.testbed).cluster.nodes for p in grid[-200:]) >= 8
    for p in grid[::37]:  # a seeded slice: the shapes split over their clusters
        scenario_of(p)


def test_a_small_scaling_slice_runs_and_plots(tmp_path):
    grid = [p for p in study.grid(kernels=["gemm_rs", "ag_gemm"]) if p.size == study.SIZES[p.kernel][0]
            and p.testbed.endswith(("-2x8", "-4x8")) and "2to1" not in p.testbed][:20]
    grid += [p for p in study.algorithm_points(["ag_gemm"], clusters=("ib-400g-rail",), sizes=slice(0, 1))
             if p.testbed.endswith(("-2x8", "-4x8"))]
    rows = run_grid(grid, tmp_path, workers=2)
    assert len(rows) == len(grid) and not [r for r in rows if "error" in r]
    assert all(r["collapsed"] for r in rows if r["nodes"] > 1)
    figures = {p.name for p in study.plots(rows, tmp_path)}
    if importlib.util.find_spec("matplotlib") is None:  # the plots need the dev extra
        assert figures == set()
    else:
        assert figures >= {"speedup_vs_gpus.png", "bytes_per_tier.png"}
    table = study.summary(rows)
    assert "| gemm_rs | 2048 | ib-400g-rail |" in table and "| ag_gemm | AG+GEMM ring forwarding / auto |" in table
    algorithms = study.algorithms_summary(rows)
    assert "| ag_gemm | 4096 | ib-400g-rail | ring | " in algorithms
    assert "| ag_gemm | 4096 | ib-400g-rail | auto | " in algorithms and "(direct)" in algorithms  # 2 nodes


def test_causal_attention_and_shifted_zipf_moe_reach_64_nodes_collapsed(tmp_path):
    """The study's node-symmetric variants (study.symmetric_points): every node count to 64 on both
    rail clusters; they run collapsed, and at 2 nodes the collapsed times are the full run's."""
    from mkernel.runner import run

    every = study.symmetric_points()
    assert {p.options for p in every} == {(("causal", 1),), (("routing", "zipf_shifted"),)}
    assert {load_scenario(p.testbed).cluster.nodes for p in every} == set(scaleout.NODES) and max(scaleout.NODES) == 64
    assert set(every) <= set(study.grid())
    pts = [p for p in study.symmetric_points(clusters=("ib-400g-rail",), sizes=slice(0, 1))
           if p.testbed.endswith(("-2x8", "-4x8"))]
    rows = run_grid(pts, tmp_path, workers=1)
    assert len(rows) == 4 and not [r for r in rows if "error" in r] and all(r["collapsed"] for r in rows)
    for r in (r for r in rows if r["nodes"] == 2):
        full, _ = run(scenario_of(next(p for p in pts if p.key == r["key"])), collapse=False)
        assert full["time_s"] * 1e6 == pytest.approx(r["fused_us"], rel=1e-9)
        assert full["baseline"]["time_s"] * 1e6 == pytest.approx(r["baseline_us"], rel=1e-9)
    table = study.symmetric_summary(rows)
    assert "| ring_attention | 512 | ib-400g-rail | causal=1 | " in table
    assert "| moe_dispatch_gemm | 128 | ib-400g-rail | routing=zipf_shifted | " in table


def test_the_controller_option_runs_the_fused_op_under_the_adaptive_partition(tmp_path):
    points = [Point("paper-ib-2x8", "gemm_rs", 4096, (("m", 4096), ("n", 4096), ("k", 256)), opts)
              for opts in parse_options(["controller=static,adaptive"])]
    static, adaptive = sorted(run_grid(points, tmp_path), key=lambda r: r["options"], reverse=True)
    assert static["options"] == "controller=static" and adaptive["options"] == "controller=adaptive"
    assert adaptive["baseline_us"] == static["baseline_us"]  # the baseline has no movable roles
    assert adaptive["fused_us"] != static["fused_us"]  # the controller moved SMs


def test_scenario_globs_match_bundled_names_and_an_empty_glob_is_an_error():
    from mkernel.studies.sweep import expand_scenarios

    names = expand_scenarios(["scaleout/ib-400g-rail-*", "paper-ib-2x8"])
    assert len(names) == 7 and names[-1] == "paper-ib-2x8" and "scaleout/ib-400g-rail-64x8" in names
    with pytest.raises(InputError, match="matches no bundled scenario"):
        expand_scenarios(["scaleout/nope-*"])


def test_the_scaling_grid_refuses_a_scenario_list(capsys):
    assert main(["sweep", "--grid", "scaling", "--scenarios", "paper-ib-2x8", "--out", "/nonexistent"]) == 2
    assert "scaling grid has its own" in capsys.readouterr().err


def test_a_point_survives_its_json_form():
    """Recorded simulated times name their points as JSON (tools/studies/check_sim_times.py, the pinned
    table of tests/sim): every reference-grid point and a scaling one read back equal."""
    for p in reference_grid() + study.grid()[:40]:
        assert Point.from_json(json.loads(json.dumps(p.as_json()))) == p, p


def test_committed_rows_rerun_with_their_options_as_the_sweep_read_them(tmp_path):
    """tools/studies/check_sim_times.py ``committed``: a sweep's row is rebuilt as its point, each
    option read back as the sweep reads ``--set`` (proxy.batch=1 an int: as the text '1' the point
    is refused), and rerun to the same times."""
    from pathlib import Path

    argv = ["sweep", "--out", str(tmp_path), "--sizes", "1", "--testbeds", "paper-efa-2x8", "--kernels", "gemm_rs",
            "--set", "proxy.batch=1", "--set", "transport=efa_srd"]
    assert main(argv) == 0
    path = Path(__file__).resolve().parents[2] / "tools" / "studies" / "check_sim_times.py"
    spec = importlib.util.spec_from_file_location("check_sim_times", path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    entries = tool.committed_entries(str(tmp_path), 0, 0)
    assert [e["def"]["options"] for e in entries] == [[["proxy.batch", 1], ["transport", "efa_srd"]]]
    again = tool.run_entry(entries[0])
    assert (again["fused_us"], again["baseline_us"]) == (entries[0]["fused_us"], entries[0]["baseline_us"])
