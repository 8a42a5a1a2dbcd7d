"""Bounded commands: past --timeout a command stops, says what was still running, and exits 1;
every subcommand that simulates at length or runs GPU work has a deadline by default."""
from __future__ import annotations

import json
import time

import pytest

from mkernel.studies import sweep
from mkernel.limits import bounded, step
from mkernel.cli import _parser, main
from mkernel.errors import DeadlineExceeded
from mkernel.limits import TIMEOUT_S


def test_a_run_past_its_deadline_stops_and_says_where(capsys):
    start = time.monotonic()
    # Uncollapsed on 4 nodes at M = N = 16384 the run takes about 5 s of CPU (the default size now takes
    # about 1 s, too close to the deadline); collapsed it finishes in well under 1 s.
    assert main(["run", "--no-collapse", "--nodes", "4", "--m", "16384", "--n", "16384", "--timeout", "1"]) == 1
    assert time.monotonic() - start < 5
    err = capsys.readouterr().err
    assert "mkernel run did not finish within 1 s (--timeout); it was " in err and "every rank was stopped" in err
    assert err.count("\n") == 1


class _Busy:
    def deadline_status(self) -> str:
        return "rank 3 at step 7"


def test_the_deadline_names_what_the_running_parts_report():
    busy = _Busy()  # noqa: F841 - found in this frame by the deadline
    with pytest.raises(DeadlineExceeded, match=r"it was waiting on purpose for \d s; rank 3 at step 7"):
        with bounded("a test", 0.3):
            step("waiting on purpose")
            time.sleep(5)


def test_no_deadline_with_zero_and_a_negative_one_is_refused():
    with bounded("a test", 0):
        time.sleep(0.01)
    from mkernel.errors import InputError

    with pytest.raises(InputError, match="--timeout -1"):
        with bounded("a test", -1):
            pass


@pytest.mark.parametrize("command", ["run", "explore", "sweep", "selftest", "calibrate", "bench"])
def test_every_long_subcommand_has_a_default_deadline(command):
    extra = ["--calibration", "x"] if command == "validate" else []
    args = _parser().parse_args([command, *extra])
    assert args.timeout is None and TIMEOUT_S[command] > 0


_SLEEP = [0.0]


def _sleepy_point(point) -> dict:
    """A sweep point that only takes time (module-level: worker processes unpickle it)."""
    time.sleep(_SLEEP[0])
    return {"key": point.key, "testbed": point.testbed, "kernel": point.kernel, "size": point.size,
            "fused_us": 1.0, "baseline_us": 1.0, "speedup": 1.0, "tflops_per_gpu": 1.0, "baseline_tflops_per_gpu": 1.0}


def _slow_points(monkeypatch, seconds):
    _SLEEP[0] = seconds
    monkeypatch.setattr(sweep, "run_point", _sleepy_point)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_sweep_past_its_deadline_keeps_its_rows_and_resumes(tmp_path, monkeypatch, capsys, workers):
    _slow_points(monkeypatch, 0.4 if workers == 1 else 30.0)
    out = tmp_path / "s"
    argv = ["sweep", "--kernels", "gemm_rs", "--sizes", "3", "--out", str(out), "--workers", str(workers),
            "--timeout", "1.5"]
    start = time.monotonic()
    assert main(argv) == 1
    assert time.monotonic() - start < 10  # workers stopped, not waited for
    err = capsys.readouterr().err
    assert "points finished this time" in err and "the same command resumes" in err
    done = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()] if (
        out / "results.jsonl").exists() else []
    if workers == 1:
        assert 1 <= len(done) < 6
        _slow_points(monkeypatch, 0.0)
        assert main(argv[:-2]) == 0
        assert len((out / "results.jsonl").read_text().splitlines()) == 6


def test_the_launcher_reports_each_ranks_last_step(tmp_path):
    from mkernel.hw.runtime.emulate import _RankSteps

    steps = _RankSteps(tmp_path, 3)
    steps.path(0).write_text(f"{time.monotonic() - 4:.3f} fused call 2 of 3 (poisoned outputs)")
    steps.path(2).write_text(f"{time.monotonic():.3f} 10 timed fused calls")
    status = steps.deadline_status()
    assert "rank 0: fused call 2 of 3 (poisoned outputs) (4 s)" in status
    assert "rank 1: starting" in status and "rank 2: 10 timed fused calls" in status
