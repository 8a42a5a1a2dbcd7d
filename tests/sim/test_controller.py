"""The adaptive SM partition: the policy's arithmetic, and the simulator running it on every op
with real data (moving SMs between roles must never change a result or deadlock)."""
from __future__ import annotations

import numpy as np
import pytest
from harness.cases import SHAPES, small_workload

from mkernel import Cluster, Scenario, reference
from mkernel.builders import get
from mkernel.controller import Balance, sim_controller, split
from mkernel.reference import DATA_RTOL
from mkernel.sim import SimBackend


def test_split_follows_remaining_work_within_floor_and_cap():
    p = Balance(min_sms=1, hysteresis=0, link_sms=15)
    assert p.targets(100, compute_us=50.0, intra_us=50.0, current_intra=10) == 30  # half, capped at 2 x link
    assert p.targets(100, compute_us=90.0, intra_us=10.0, current_intra=10) == 15  # 10 -> the link floor
    assert p.targets(100, compute_us=0.0, intra_us=10.0, current_intra=10) == 100  # compute done: all to intra
    assert p.targets(100, compute_us=10.0, intra_us=0.0, current_intra=10) == 0  # intra done: all to compute
    assert p.targets(100, compute_us=80.0, intra_us=20.0, current_intra=20, blocked_compute=6) == 26
    assert p.targets(100, compute_us=70.0, intra_us=30.0, current_intra=30, blocked_intra=20) == 15  # floor holds
    assert p.targets(8, compute_us=50.0, intra_us=50.0, current_intra=4) == 7  # the floor never takes compute's last SM


def test_hysteresis_keeps_a_small_change_from_moving_anything():
    p = Balance(hysteresis=2, link_sms=15)
    assert p.targets(100, compute_us=80.0, intra_us=20.0, current_intra=19) == 19
    assert p.targets(100, compute_us=80.0, intra_us=20.0, current_intra=10) == 20


@pytest.mark.parametrize("kernel", sorted(SHAPES))
def test_adaptive_runs_keep_every_op_correct(kernel):
    sc = Scenario("adaptive", Cluster("t", 2, 2), small_workload(kernel))
    w, c = sc.workload, sc.cluster
    inputs = get(kernel).make_inputs(w, c, np.random.default_rng(0))
    stats = SimBackend().run(get(kernel).build(w, c), c, inputs=inputs, controller=sim_controller(Balance()))
    for name, refs in reference.expected(w, inputs, c.gpus_per_node).items():
        for out, ref in zip(stats.outputs[name], refs):
            assert reference.relative_error(out, ref) <= DATA_RTOL
    assert not stats.hazards


def test_split_sweep_writes_a_table_that_run_then_uses(tmp_path, capsys):
    import json

    from mkernel.cli import main

    assert main(["sweep", "--kernels", "gemm_rs", "--sizes", "1", "--testbeds", "paper-ib-2x8",
                 "--comm-sms", "4,16,40", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "paper-ib-2x8/gemm_rs/2048: best" in out
    table = json.loads((tmp_path / "splits.json").read_text())
    (key, entry), = table.items()
    assert key == "paper-ib-2x8/2x8/gemm_rs/2048x2048x128" and min(entry["normalised"].values()) == 1.0
    entry["best_intra_sms"] = 40  # pretend 40 won: run must take it
    (tmp_path / "splits.json").write_text(json.dumps(table))
    assert main(["run", "paper-ib-2x8", "--kernel", "gemm_rs", "--m", "2048", "--n", "2048", "--k", "128",
                 "--splits", str(tmp_path / "splits.json"), "--json", str(tmp_path / "r.json")]) == 0
    assert json.loads((tmp_path / "r.json").read_text())["roles"]["intra"] == 40
    capsys.readouterr()
    assert main(["run", "paper-ib-2x8", "--m", "4096", "--n", "4096", "--k", "256",  # another shape: no entry
                 "--splits", str(tmp_path / "splits.json"), "--json", str(tmp_path / "r2.json")]) == 2
    assert "no entry for paper-ib-2x8/2x8/gemm_ar/4096x4096x256" in capsys.readouterr().err
    assert main(["sweep", "--kernels", "gemm_rs", "--sizes", "1", "--comm-sms", "0,4", "--out", str(tmp_path)]) == 2


def test_run_adaptive_takes_the_controller_and_the_static_split_stays_the_default(tmp_path):
    """`mkernel run --adaptive` moves SMs (a different time from the same schedule's static run, the
    adaptive one equal to the simulator driven by the policy directly); without it, nothing moves."""
    import json

    from mkernel.cli import main
    from mkernel.runner import build

    args = ["run", "paper-ib-2x8", "--kernel", "gemm_rs", "--m", "4096", "--n", "4096", "--k", "256", "--collapse"]
    assert main(args + ["--json", str(tmp_path / "static.json")]) == 0
    assert main(args + ["--adaptive", "--json", str(tmp_path / "adaptive.json")]) == 0
    static, adaptive = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("static", "adaptive"))
    from mkernel.cli import _parser
    from mkernel.cli_run import scenario_from_args

    sc = scenario_from_args(_parser().parse_args(args))
    fused, _ = build(sc)
    c = sc.cluster
    direct = SimBackend().run(fused, c, collapse=True, controller=sim_controller(Balance.for_cluster(c))).time_s
    assert adaptive["time_s"] == pytest.approx(direct, rel=1e-12) and adaptive["time_s"] != static["time_s"]
    assert adaptive["correct"] is not False and adaptive["roles"] == static["roles"]
    assert "adaptive SM partition" in adaptive["note"] and "adaptive" not in static["note"]


def test_split_sweep_takes_a_backend_and_refuses_hw_where_it_cannot_run(tmp_path, capsys):
    """`--backend hw` reaches the hw backend (which says why it cannot run on a machine without a GPU
    or torch); the grid sweep itself runs on the simulator only."""
    from mkernel.cli import main
    from mkernel.hw import unavailable

    args = ["sweep", "--kernels", "gemm_rs", "--sizes", "1", "--testbeds", "paper-ib-2x8", "--out", str(tmp_path)]
    if unavailable():
        assert main(args + ["--comm-sms", "4,16", "--backend", "hw"]) == 2
        assert "cannot run gemm_rs" in capsys.readouterr().err
    assert main(args + ["--backend", "hw"]) == 2
    assert "the grid sweep runs on the simulator" in capsys.readouterr().err


def test_the_trace_of_an_adaptive_run_has_the_intra_target_track(tmp_path):
    import json

    from mkernel.cli import main

    trace = tmp_path / "t.json"
    assert main(["run", "--kernel", "gemm_rs", "--m", "2048", "--n", "2048", "--k", "128", "--nodes", "2",
                 "--gpus-per-node", "2", "--adaptive", "--trace", str(trace)]) == 0
    events = json.loads(trace.read_text())["traceEvents"]
    targets = [e for e in events if e["ph"] == "C" and e["name"] == "intra target SMs"]
    assert targets and all(0 <= e["args"]["SMs"] <= 132 for e in targets)
    assert any(e["ph"] == "C" and e["name"].endswith(" GB/s") for e in events)  # the link tracks stay


def test_the_policy_keeps_a_block_for_every_role_with_work():
    """What the kernel's progress argument needs: a role with work left gets at least min_sms, one
    without gets none, whatever the counters say."""
    rng = np.random.default_rng(3)
    for _ in range(3000):
        movable = int(rng.integers(2, 133))
        compute, intra = (int(x) * int(rng.random() > 0.2) for x in rng.integers(0, 10**9, 2))
        got = split(movable, compute, intra, int(rng.integers(0, movable + 1)), int(rng.integers(0, 40)),
                    int(rng.integers(0, 40)), 1, int(rng.integers(0, 4)), int(rng.integers(1, 40)))
        if intra == 0:
            assert got == 0
        elif compute == 0:
            assert got == movable
        else:
            assert 1 <= got <= movable - 1
