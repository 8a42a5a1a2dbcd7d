"""Training with the ops on the GPU: the fused backward of every op against the torch path's
float64 gradients, and 20 bf16 SGD steps of a two-layer TP MLP and a ring-attention block
against the same model written with torch only, step by step (tests/harness/training.py), at world 1 and
on the emulated 2x2 cluster; the TP step captured in a CUDA graph and compiled with inductor.
The same on the CPU (torch path, float64, gloo ranks): tests/hw/test_autograd.py. Also here: the
TP layers' shapes and errors."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="training with the torch ops needs torch (pip install torch)")

from harness import training  # noqa: E402
from harness.rank import TOLERANCE  # noqa: E402

from mkernel.errors import InputError  # noqa: E402


def test_the_zigzag_layout_gives_each_rank_two_chunks_from_both_ends():
    rows = [training.token_rows("attention-causal", r, 2, 16).tolist() for r in range(2)]
    assert rows == [[0, 1, 2, 3, 12, 13, 14, 15], [4, 5, 6, 7, 8, 9, 10, 11]]


def test_layers_refuse_shapes_that_do_not_split_with_one_clear_error():
    from mkernel.hw import tp
    from mkernel.hw.groups import GroupInfo

    four = GroupInfo("four", 4, 1, False, None)  # the layers read only size and rank at construction
    with pytest.raises(InputError, match="out_features = 6 does not split over 4 ranks"):
        tp.ColumnParallelLinear(8, 6, group=four)
    with pytest.raises(InputError, match="in_features = 10 does not split over 4 ranks"):
        tp.RowParallelLinear(10, 8, group=four)
    with pytest.raises(InputError, match="reduce='sum' is not one of scatter, all"):
        tp.RowParallelLinear(8, 8, reduce="sum")
    layer = tp.ColumnParallelLinear(8, 6)
    with pytest.raises(InputError, match="last dimension is 5; this rank's shard takes 8 features"):
        layer(torch.randn(3, 5))
    with pytest.raises(InputError, match=r"a Linear\(8, 6, bias=True\) is needed"):
        layer.load_(torch.nn.Linear(8, 7))


def test_a_ranks_shard_is_its_slice_of_the_full_layer():
    from mkernel.hw import tp
    from mkernel.hw.groups import GroupInfo

    full = torch.nn.Linear(8, 12)
    col = tp.ColumnParallelLinear.from_linear(full, GroupInfo("four", 4, 2, False, None))
    row = tp.RowParallelLinear.from_linear(torch.nn.Linear(12, 8), GroupInfo("four", 4, 3, False, None))
    assert torch.equal(col.weight, full.weight.t()[:, 6:9]) and torch.equal(col.bias, full.bias[6:9])
    assert row.weight.shape == (3, 8) and row.bias.shape == (8,)


def test_layers_at_world_1_are_the_torch_mlp_on_sequence_first_inputs():
    from mkernel.hw import tp

    ref = training.Mlp(8, 16).double()
    x = torch.randn(5, 3, 8, dtype=torch.float64)  # [S, B, H]: only the leading dimension is split
    for reduce in ("scatter", "all"):
        mlp = tp.ParallelMLP.from_mlp(ref.fc1, ref.fc2, reduce=reduce)
        assert torch.allclose(mlp(x), ref(x), rtol=1e-12, atol=1e-12)


# ---- on the GPU (tests/harness/training.py's rank functions, through emulate.launch) ----

def _launch(fn, nodes: int, gpn: int, *args, timeout_s: float = 600):
    from mkernel.hw.runtime.emulate import launch

    return launch(fn, nodes * gpn, args=(gpn, *args), timeout_s=timeout_s)


TOPOLOGIES = [pytest.param(1, 1, id="world1"), pytest.param(2, 2, id="emulated-2x2")]


@pytest.mark.gpu
@pytest.mark.parametrize("nodes,gpn", TOPOLOGIES)
def test_fused_backward_of_every_op_matches_the_torch_paths_float64_gradients(nodes, gpn):
    for r in _launch(training.grads_rank, nodes, gpn):
        assert r["device_error"] is None and r["nan"] == 0, r
        assert all(e <= TOLERANCE for e in r["errors"].values()), r


@pytest.mark.gpu
@pytest.mark.parametrize("kind", training.KINDS)
@pytest.mark.parametrize("nodes,gpn", TOPOLOGIES)
def test_bf16_training_on_the_fused_path_matches_the_torch_model(nodes, gpn, kind):
    """One model kind per test: on the emulated 2x2 all four kinds in one job ran past 330 s (every
    op's forward and backward executors compile on first use), more than a device call can hold."""
    modes = ("auto", "fused") if nodes * gpn == 1 else ("fused", "fallback")
    for r in _launch(training.train_rank, nodes, gpn, modes, (kind,), timeout_s=600):
        summary = {k: r[k] for k in ("rank", "runs", "device_error")}
        assert r["device_error"] is None, summary
        assert all(v["error"] <= training.BF16_TOLERANCE and v["trains"] for v in r["curves"].values()), summary


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["graph", "compile"])
@pytest.mark.parametrize("mode", ["auto", "fused"])
def test_tp_step_under_cuda_graphs_and_torch_compile_matches_eager(mode, how):
    for r in _launch(training.replay_rank, 1, 1, mode, how):
        assert r["device_error"] is None and max(r["errors"]) <= training.BF16_TOLERANCE, r


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["graph", "compile"])
def test_tp_step_on_real_nvlink_under_cuda_graphs_and_torch_compile(how):
    gpus = min(torch.cuda.device_count(), 8)
    if gpus < 2:
        pytest.skip(f"needs 2 GPUs (one rank per GPU, NCCL); this host has {gpus}")
    for mode in ("fallback", "fused"):
        for r in _launch(training.replay_rank, 1, gpus, mode, how):
            assert r["device_error"] is None and max(r["errors"]) <= training.BF16_TOLERANCE, (mode, r)


# ---- tools/bench/bench_train.py ----

TOOL = __import__("pathlib").Path(__file__).resolve().parents[2] / "tools" / "bench" / "bench_train.py"


def _tool():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_train", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_train_refuses_bad_sizes_with_exit_2_and_one_sentence():
    import subprocess
    import sys

    res = subprocess.run([sys.executable, str(TOOL), "--sizes", "4096x2048"], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 2 and "must be TxHxF" in res.stderr and "Traceback" not in res.stderr


def test_bench_train_reports_the_slowest_rank_and_both_speedups():
    tool = _tool()
    fast = {"loss": 1.0, "loss_rel_diff": 0.0, "eager_s": 2.0}
    per_rank = [{"torch": {**fast, "eager_s": 4.0}, "tp-fallback": fast, "tp-auto": {**fast, "eager_s": 1.0},
                 "tp-fused": {"failed": "InputError: no"}},
                {"torch": {**fast, "eager_s": 4.0}, "tp-fallback": {**fast, "eager_s": 3.0},
                 "tp-auto": {**fast, "eager_s": 1.5}, "tp-fused": {"failed": "InputError: no"}}]
    out = tool._combine(per_rank)
    assert out["tp-fallback"]["eager_s"] == 3.0 and out["tp-auto"]["eager_speedup_over_torch"] == 4.0 / 1.5
    assert out["tp-auto"]["eager_speedup_over_tp-fallback"] == 2.0 and out["tp-fused"] == {"failed": "InputError: no"}


@pytest.mark.gpu
def test_bench_train_runs_at_world_1_with_graphs(tmp_path):
    import json
    import subprocess
    import sys

    out = tmp_path / "train.json"
    res = subprocess.run([sys.executable, str(TOOL), "--sizes", "1024x512x2048", "--iters", "3", "--graphs",
                          "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    variants = json.loads(out.read_text())["results"][0]["variants"]
    assert set(variants) == {"torch", "tp-fallback", "tp-auto", "tp-fused"}
    assert all("failed" not in v and v["graph_s"] > 0 for v in variants.values()), variants
