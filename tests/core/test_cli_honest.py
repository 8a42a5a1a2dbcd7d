"""Honest tables: every time says where it came from (predicted, measured, emulated); a speedup is
given only between times of one real source, so an emulated hw cluster (ranks sharing a GPU, a
baseline whose collectives run through gloo) shows no speedup but the simulator's, labelled."""
from __future__ import annotations

import dataclasses

import pytest

from mkernel import reference, runner
from mkernel.backend import RunStats
from mkernel.cli import main
from mkernel.hw import HwBackend
from mkernel.report import print_result
from mkernel.result import check_result
from mkernel.scenario import load_scenario


class FakeHw(HwBackend):
    """Stands in for the GPU backend (its name, capabilities and tolerance): the oracle's outputs,
    a fixed time, an emulated cluster."""

    def __init__(self, emulated: bool = True) -> None:
        self.emulated = emulated

    def cluster_for(self, cluster):
        return cluster

    def supports(self, schedule, cluster):
        return None

    def run(self, schedule, cluster, *, inputs=None, workload=None, **_):
        w = workload or _WORKLOAD[0]
        outputs = reference.expected(w, inputs, cluster.gpus_per_node)
        time_s = 1e-4 if len(schedule.launches) == 1 else 8e-4  # the gloo baseline: 8x slower
        zero = {"nvlink": 0.0, "network": 0.0, "host": 0.0}
        return RunStats(time_s, (time_s,) * schedule.world, zero, zero, 0.1, outputs=outputs,
                        metrics={"note": "emulated cluster" if self.emulated else "measured", "emulated": self.emulated})


_WORKLOAD = []


def _scenario(nodes=2, gpn=2):
    sc = load_scenario("default")
    w = dataclasses.replace(sc.workload, m=1000, n=776, k=328)
    _WORKLOAD[:] = [w]
    return dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, nodes=nodes, gpus_per_node=gpn), workload=w)


@pytest.mark.parametrize("nodes,gpn,emulated", [(2, 2, True), (1, 2, False)])
def test_a_hw_run_gives_no_speedup_against_a_gloo_baseline(monkeypatch, capsys, nodes, gpn, emulated):
    monkeypatch.setattr(runner, "get_backend", lambda name: FakeHw(emulated) if name == "hw" else _real(name))
    result, _ = runner.run(_scenario(nodes, gpn), backend="hw")
    assert check_result(result) == []
    assert result["time_source"] == ("emulated" if emulated else "measured")
    assert result["baseline"]["time_source"] == "emulated" and result["speedup"] is None
    pred = result["predicted"]
    assert pred and pred["speedup"] == pytest.approx(pred["baseline_time_s"] / pred["time_s"])
    assert "gloo" in result["note"]
    print_result(result)
    out = capsys.readouterr().out
    assert "8.000x" not in out and "speedup (" not in out and "predicted (the simulator" in out
    assert f"fused time ({result['time_source']})" in out and "time left out" in out


def _real(name):
    from mkernel.backend import get_backend

    return get_backend(name)


def test_a_sim_run_labels_every_time_predicted(capsys):
    assert main(["run", "--nodes", "1", "--gpus-per-node", "2", "--m", "256", "--n", "256", "--k", "64"]) == 0
    out = capsys.readouterr().out
    for row in ("fused time (predicted)", "baseline time (predicted", "speedup (predicted)", "TFLOPS per GPU (predicted)"):
        assert row in out


def test_the_schema_refuses_a_speedup_from_an_emulation():
    result, _ = runner.run(_scenario(1, 2))
    assert check_result(result) == []
    bad = {**result, "baseline": {**result["baseline"], "time_source": "emulated"}}
    assert any("speedup is given exactly when" in p for p in check_result(bad))
    assert check_result({**bad, "speedup": None}) == []
