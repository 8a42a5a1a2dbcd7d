"""The CLI's hw path on the emulated 2 x 2 cluster (four ranks on the GPUs at hand, under MPS): every
op finishes within its deadline, correct against the float64 oracle, with an honest table (no
speedup against the gloo baseline, the simulator's prediction labelled); the MoE command of
default expert sizes is refused at once with the figures. GPU only; about 3-4 minutes on one H200."""
from __future__ import annotations

import json
import time

import pytest

from mkernel.cli import main
from mkernel.result import check_result

pytestmark = pytest.mark.gpu

EMULATED = ["--backend", "hw", "--nodes", "2", "--gpus-per-node", "2", "--timeout", "300"]
OPS = {
    "gemm_ar": ["--kernel", "gemm_ar", "--m", "1000", "--n", "776", "--k", "328"],
    "gemm_rs": ["--kernel", "gemm_rs", "--m", "1024", "--n", "520", "--k", "72"],
    "ag_gemm": ["--kernel", "ag_gemm", "--m", "1024", "--n", "264", "--k", "72"],
    "ring_attention": ["--kernel", "ring_attention", "--seq", "256", "--n", "4", "--k", "64"],
    "ring_attention_causal": ["--kernel", "ring_attention", "--seq", "256", "--n", "4", "--k", "64", "--causal"],
    "moe_dispatch_gemm": ["--kernel", "moe_dispatch_gemm", "--tokens", "512", "--n", "264", "--k", "136"],
}


@pytest.mark.parametrize("op", OPS)
def test_each_op_runs_on_the_emulated_cluster_correct_and_honest(op, tmp_path, capsys):
    out = tmp_path / "r.json"
    start = time.monotonic()
    assert main(["run", *EMULATED, *OPS[op], "--json", str(out)]) == 0, capsys.readouterr().err
    assert time.monotonic() - start < 300
    result = json.loads(out.read_text())
    assert check_result(result) == [] and result["correct"] is True, result["error"]
    assert result["time_source"] == "emulated" and result["baseline"]["time_source"] == "emulated"
    assert result["speedup"] is None and result["predicted"]["speedup"] > 0
    table = capsys.readouterr().out
    assert "fused time (emulated)" in table and "speedup (" not in table and "predicted (the simulator" in table


def test_the_moe_run_of_default_expert_sizes_is_refused_at_once(capsys):
    """The run that printed nothing for 100 s: 256 experts of 7168 x 2048 are 15 GB of float32
    weights before any token is routed."""
    start = time.monotonic()
    assert main(["run", "--backend", "hw", "--kernel", "moe_dispatch_gemm", "--tokens", "1000", "--nodes", "2",
                 "--gpus-per-node", "2"]) == 2
    assert time.monotonic() - start < 20
    err = capsys.readouterr().err
    assert "experts' weights alone are 15.0 GB" in err and "--force" in err and err.count("\n") == 1


def test_a_hw_run_past_its_deadline_stops_every_rank_and_names_their_steps(capsys):
    assert main(["run", *EMULATED[:-2], *OPS["gemm_ar"], "--timeout", "8"]) == 1
    err = capsys.readouterr().err
    assert "did not finish within 8 s" in err and "every rank was stopped" in err
