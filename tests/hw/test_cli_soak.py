"""tools/studies/soak.py: its plan of calls covers every op and both paths on shapes the fused kernel takes,
every rank draws the same plan, and without a GPU it says so (exit 2); on a GPU, a short soak passes."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "studies" / "soak.py"


def _soak():
    spec = importlib.util.spec_from_file_location("soak", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_plan_covers_every_op_and_path_the_same_on_every_rank():
    soak = _soak()
    plan = soak.draws(3, 4000, shapes_per_op=3)
    assert plan == soak.draws(3, 4000, shapes_per_op=3)
    seen = Counter((op, path) for op, path, _, _ in plan)
    assert set(seen) == {(op, path) for op in soak.SHAPES for path in soak.PATHS}
    assert min(seen.values()) > 200


def test_every_shape_is_one_the_fused_kernel_takes_with_odd_sizes_among_them():
    soak = _soak()
    for op, shapes in soak.SHAPES.items():
        for shape in shapes:
            if op == "ring_attention":
                assert shape[3] in (64, 128) and shape[2] % 2 == 0
            elif op == "moe_dispatch_gemm":
                tokens, hidden, width, experts, topk = shape
                assert hidden % 8 == 0 and width % 8 == 0 and experts % 4 == 0 and topk <= experts
            else:
                m, n, k = shape
                assert n % 8 == 0 and k % 8 == 0 and (op != "gemm_rs" or m % 4 == 0)
    assert any(s[0] % 2 for shapes in soak.SHAPES.values() for s in shapes)  # odd rows


def test_without_a_gpu_it_says_so(tmp_path):
    from mkernel.hw import unavailable

    if unavailable() is None:
        pytest.skip("a GPU is here: the GPU test below runs the soak")
    proc = subprocess.run([sys.executable, str(TOOL), "--calls", "1"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("soak: ")
    assert subprocess.run([sys.executable, str(TOOL), "--help"], capture_output=True, timeout=120).returncode == 0


@pytest.mark.gpu
def test_a_short_soak_passes(tmp_path):
    proc = subprocess.run([sys.executable, str(TOOL), "--calls", "300", "--minutes", "2", "--out",
                           str(tmp_path / "soak.json")], capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
