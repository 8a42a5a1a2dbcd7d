"""mkernel sweep: the reference grid's shapes, a small resumable run, its table and plot."""
from __future__ import annotations

import json

from mkernel.cli import main
from mkernel.sweep import reference_grid


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
    assert header.startswith("key,testbed,kernel,size,m,n,k,fused_us")
    assert (tmp_path / "speedup.png").exists() or "plot skipped" in capsys.readouterr().out
