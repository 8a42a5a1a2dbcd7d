"""Workload.schedule (mkernel/builders/_auto.py): ``auto`` runs the fused schedule where the cost model
finds it faster than the op's baseline and the baseline elsewhere, ``fused`` (the default) and
``baseline`` force one; the result says which ran. The oracle here is the forced runs' own times."""
from __future__ import annotations

import json

import pytest

from mkernel.cli import main

SMALL = ["--m", "1024", "--n", "1024", "--k", "64"]  # too little work for the fused schedule to pay
LARGE = ["--m", "8192", "--n", "8192", "--k", "512"]  # the fused schedule wins (docs/result-schema.md)


def _run(tmp_path, shape, *schedule):
    out = tmp_path / f"{'-'.join(schedule) or 'default'}.json"
    assert main(["run", "paper-ib-2x8", "--kernel", "gemm_ar", *shape, *schedule, "--json", str(out)]) == 0
    return json.loads(out.read_text())


@pytest.mark.parametrize("shape", [SMALL, LARGE], ids=["small", "large"])
def test_auto_runs_the_faster_of_the_forced_schedules_and_says_which(tmp_path, shape):
    fused = _run(tmp_path, shape)
    base = _run(tmp_path, shape, "--schedule", "baseline")
    auto = _run(tmp_path, shape, "--schedule", "auto")
    assert fused["schedule"] == "fused" and base["schedule"] == "baseline"
    assert base["time_s"] == pytest.approx(fused["baseline"]["time_s"], rel=1e-9)  # the baseline, timed alike
    faster = "fused" if fused["time_s"] < fused["baseline"]["time_s"] else "baseline"
    assert auto["schedule"] == faster, (fused["time_s"], fused["baseline"]["time_s"])
    assert auto["time_s"] == pytest.approx(min(fused["time_s"], fused["baseline"]["time_s"]), rel=1e-9)
    assert auto["time_s"] <= auto["baseline"]["time_s"] * (1 + 1e-9)


def test_a_schedule_that_does_not_exist_is_refused_before_any_run(capsys):
    with pytest.raises(SystemExit):
        main(["run", "paper-ib-2x8", "--kernel", "gemm_ar", *SMALL, "--schedule", "fastest"])
    assert "invalid choice: 'fastest'" in capsys.readouterr().err
