"""One splits schema: what tools/studies/hw_splits.py writes is the table of mkernel/studies/splits.py,
so `mkernel run --splits` takes its best split (through the reader it uses) and `mkernel accuracy
--splits` its measured curves; files the tool wrote before stay readable by accuracy."""
from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import pytest

from mkernel.cli import main
from mkernel.errors import InputError
from mkernel.ir import Role
from mkernel.problems import Workload
from mkernel.scenario import Scenario
from mkernel.studies import accuracy, splits

ROOT = Path(__file__).resolve().parents[2]
CAL = ROOT / "docs/results/data/cal-2026-11-29/calibration.json"
LEGACY = ROOT / "docs/results/data/nvlink-2026-11-30/run1/splits.json"  # the tool's file before 2026-12-02


def _tool():
    spec = importlib.util.spec_from_file_location("hw_splits", ROOT / "tools" / "studies" / "hw_splits.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SHAPE = {"m": 512, "n": 256, "k": 128}
TIMES = {2: 3e-4, 4: 2e-4, 8: 2.5e-4}  # the slowest rank's seconds per intra-SM budget: 4 is best


def _written(tmp_path) -> Path:
    """The tool's table for one measured gemm_rs curve on a 2-GPU node, as its rank 0 writes it."""
    tool = _tool()
    combined = [{"kernel": "gemm_rs", "size": 512, "shape": SHAPE, "world": 2, "fallback_s": 1e-3,
                 "splits": {n: {"s": s, "rel_err": 1e-3, "unwritten": 0, "ok": True, "compute_sms": 132 - n}
                            for n, s in TIMES.items()}}]
    path = tmp_path / "splits.json"
    splits.write(tool.table_rows(combined, 2, 132, gpu="H200", torch="2.13", commit="abc", iters=10, copy_rows=64),
                 path)
    return path


def test_the_tools_table_loads_through_the_reader_run_splits_uses(tmp_path):
    path = _written(tmp_path)
    table = splits.read_table(path)  # what `mkernel run --splits` reads, every entry checked
    (entry,) = table.values()
    assert entry["best_intra_sms"] == 4 and entry["normalised"]["2"] == pytest.approx(1.5)
    w = Workload(kernel="gemm_rs", **SHAPE)
    here = Scenario("mine", dataclasses.replace(_tool().cluster(2, 132), name="my-node"), w)
    applied = splits.apply(here, path)  # a cluster of another name, the same machine: found by its digest
    assert dict(applied.workload.sms)[Role.INTRA] == 4
    other = Scenario("mine", dataclasses.replace(_tool().cluster(2, 100), name="my-node"), w)
    with pytest.raises(InputError, match="no entry"):
        splits.apply(other, path)  # a table never applies to another machine


def test_accuracy_reads_the_measured_curves_back_as_the_tool_measured_them(tmp_path):
    measured = splits.read_measured(json.loads(_written(tmp_path).read_text()), "splits.json")
    accuracy.check_splits("splits.json", measured)
    (row,) = measured["rows"]
    assert measured["world"] == 2 and (row["kernel"], row["size"], row["shape"]) == ("gemm_rs", 512, SHAPE)
    assert {int(n): x["s"] for n, x in row["splits"].items()} == TIMES
    assert row["fallback_s"] == 1e-3 and row["gpu"] == "H200" and row["copy_rows"] == 64


def test_the_tools_files_from_before_stay_readable_and_other_tables_are_refused(tmp_path, capsys):
    legacy = json.loads(LEGACY.read_text())
    assert splits.read_measured(legacy, str(LEGACY)) is legacy  # committed results keep reproducing
    with pytest.raises(InputError, match="before 2026-12-02"):
        splits.read_table(LEGACY)  # never a table `run --splits` could apply
    sweep = tmp_path / "sweep.json"
    sweep.write_text(json.dumps({"a/1x2/gemm_rs/1x1x1": {"best_intra_sms": 4, "normalised": {"4": 1.0}}}))
    with pytest.raises(InputError, match="holds no measured curve"):
        splits.read_measured(json.loads(sweep.read_text()), str(sweep))
    assert main(["accuracy", "--calibration", str(CAL), "--splits", str(sweep)]) == 2
    assert "holds no measured curve" in capsys.readouterr().err


def test_mkernel_accuracy_takes_the_tools_table(tmp_path, capsys):
    assert main(["accuracy", "--calibration", str(CAL), "--splits", str(_written(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "gemm_rs size 512, 4 intra SMs, world 2 NVLink" in out and "split order rank correlation" in out
