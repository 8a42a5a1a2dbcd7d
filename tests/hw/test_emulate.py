"""The emulated cluster's launcher on CPU (no GPU, no torch): a rank that crashes without a result
is reported at once with its exit code, not after the launcher's deadline; a rank's error comes back
with its traceback; a silent rank fails at the deadline."""
from __future__ import annotations

import multiprocessing as mp
import os
import time

import pytest

from mkernel.hw.runtime.emulate import RankFailed, _collect


def _ok(rank: int, out) -> None:
    out.put((rank, "ok", rank * 10))


def _crash(rank: int, out) -> None:
    os._exit(3)  # as a CUDA fault's abort does: no result, no Python exception


def _error(rank: int, out) -> None:
    out.put((rank, "error", "Traceback: boom"))


def _late_error(rank: int, out) -> None:
    time.sleep(1.0)
    out.put((rank, "error", f"Traceback: ...\nDeviceWaitError: rank {rank}: timeout waiting on flag 20\n"))


def _silent(rank: int, out) -> None:
    time.sleep(30)


def _start(targets) -> tuple[list, object]:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=t, args=(r, out), daemon=True) for r, t in enumerate(targets)]
    for p in procs:
        p.start()
    return procs, out


def _stop(procs) -> None:
    for p in procs:
        if p.is_alive():
            p.kill()


def test_results_come_back_by_rank():
    procs, out = _start([_ok, _ok, _ok])
    try:
        assert _collect(procs, out, timeout_s=60) == {0: 0, 1: 10, 2: 20}
    finally:
        _stop(procs)


def test_a_crashed_rank_is_named_with_its_exit_code_long_before_the_deadline():
    procs, out = _start([_ok, _crash, _silent])
    t0 = time.monotonic()
    try:
        with pytest.raises(RankFailed, match=r"ranks \[1\] exited without a result \(rank 1: exit code 3"):
            _collect(procs, out, timeout_s=120)
    finally:
        _stop(procs)
    assert time.monotonic() - t0 < 20


def test_a_rank_error_carries_its_traceback():
    procs, out = _start([_error, _silent])
    try:
        with pytest.raises(RankFailed, match="rank 0 failed:\nTraceback: boom"):
            _collect(procs, out, timeout_s=60)
    finally:
        _stop(procs)


def test_every_failed_rank_is_named_not_only_the_first():
    """In a collective failure the first rank to report is rarely the one that stalled: the report
    names every rank's error (its last line), which finished and which said nothing."""
    procs, out = _start([_error, _late_error, _ok, _silent])
    t0 = time.monotonic()
    try:
        with pytest.raises(RankFailed) as info:
            _collect(procs, out, timeout_s=60, grace_s=3.0)
    finally:
        _stop(procs)
    msg = str(info.value)
    assert msg.startswith("rank 0 failed:\nTraceback: boom"), msg
    assert "  rank 1: DeviceWaitError: rank 1: timeout waiting on flag 20" in msg, msg
    assert "  rank 2: finished" in msg and "  rank 3: no report" in msg, msg
    assert time.monotonic() - t0 < 30  # the grace is bounded: the silent rank is not waited for


def test_a_silent_rank_fails_at_the_deadline():
    procs, out = _start([_ok, _silent])
    try:
        with pytest.raises(RankFailed, match=r"ranks \[1\] did not finish within 2 s"):
            _collect(procs, out, timeout_s=2)
    finally:
        _stop(procs)


def test_an_unknown_module_loading_is_refused_before_any_rank_starts():
    from mkernel.errors import InputError
    from mkernel.hw.runtime.emulate import launch

    with pytest.raises(InputError, match="module_loading='lazy': EAGER or LAZY"):
        launch(_ok, 2, gpus=1, module_loading="lazy")
