"""Bounded commands: a deadline and a progress line for every subcommand that simulates at length
or runs GPU work.

:func:`bounded` wraps a subcommand: it shows the current step on stderr (a rich spinner with the
elapsed time, on a terminal) and, when ``timeout_s`` passes, stops the work where it is and raises
:class:`~mkernel.errors.DeadlineExceeded` (exit 1) naming the step that was running and what the
running parts were doing: each object in the interrupted call stack with a ``deadline_status()``
method says its piece (the simulator's model: its schedule, simulated time and the ranks still
running; the GPU launcher: each rank's last step). Leaving the stack stops every rank (the launcher
kills its rank processes on the way out; a sweep kills its workers).

:func:`step` is how library code names what it is doing; outside :func:`bounded` it only records it.
"""
from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from .errors import DeadlineExceeded, InputError

_state = {"step": "starting", "since": time.monotonic()}


def step(text: str) -> None:
    """Name what the command is doing now (shown in the progress line and in a deadline error)."""
    _state["step"], _state["since"] = text, time.monotonic()


def _statuses(frame) -> list[str]:
    """``deadline_status()`` of every object in the interrupted stack that has one, innermost first."""
    found, seen = [], set()
    while frame is not None:
        for value in list(frame.f_locals.values()):
            status = getattr(type(value), "deadline_status", None)
            if callable(status) and id(value) not in seen:
                seen.add(id(value))
                try:
                    found.append(status(value))
                except Exception as exc:  # noqa: BLE001 - a status must never hide the deadline
                    found.append(f"({type(value).__name__}: no status: {exc})")
        frame = frame.f_back
    return found


class _Line:
    """The progress line: the current step and the seconds since the command began."""

    def __init__(self, what: str, start: float) -> None:
        self.what, self.start = what, start

    def __rich__(self) -> str:
        return f"{self.what}: {_state['step']} ({time.monotonic() - self.start:.0f} s)"


@contextmanager
def bounded(what: str, timeout_s: float | None) -> Iterator[None]:
    """Run the body under a deadline of ``timeout_s`` seconds (None or 0: none) with a progress line."""
    if timeout_s is not None and timeout_s < 0:
        raise InputError(f"--timeout {timeout_s}: seconds >= 0 (0: no deadline)")
    start = time.monotonic()
    step("starting")
    armed = bool(timeout_s) and threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGALRM")

    def expire(_signum, frame) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        parts = _statuses(frame)
        raise DeadlineExceeded(f"{what} did not finish within {timeout_s:g} s (--timeout); it was "
                               f"{_state['step']} for {time.monotonic() - _state['since']:.0f} s"
                               + ("".join(f"; {p}" for p in parts)) + "; every rank was stopped")

    previous = signal.signal(signal.SIGALRM, expire) if armed else None
    if armed:
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
    live = None
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.live import Live
        from rich.spinner import Spinner

        live = Live(Spinner("dots", _Line(what, start)), console=Console(stderr=True), transient=True,
                    refresh_per_second=4)
        live.start()
    try:
        yield
    finally:
        if live is not None:
            live.stop()
        if armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
