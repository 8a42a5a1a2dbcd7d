"""The hazard tracker's calls as the event core makes them: appended to a log, or handed on.

A tracked every-node run checks reads and lands writes about 150k times (the 2 x 8 GEMM+AR 32768^2
run). :class:`~mkernel.sim.hazardlog.LoggedTracker` decides its hazards from the whole log when the
run ends, so each call only appends four items; made on a Python tracker each call was a Python
frame (~1.5-2.3k instructions). :class:`CallLog` is a class of the compiled core, so the engine's
call is a native one. :class:`Forward` hands each call to a tracker that decides as it goes (the
live :class:`~mkernel.sim.hazards.ArrivalTracker`, or none), for tests that watch a run that way.
"""
from __future__ import annotations

from typing import Any, Final

LANDED: Final = -1.0  # a landing's time in the log (a check's is its simulated time, >= 0)
_LANDED: Final[object] = LANDED  # (boxed once: a float appended to a list is boxed at each append)


class CallLog:
    """``items``: per call four items, flat (entry, first member, members or None, time or LANDED),
    so no tuple is kept per call and the columns are read by slicing (appended one by one: ``+=`` of a
    tuple made each call cost a tuple and a generic in-place concatenation); ``ends``: (rank, calls
    before it, time) of each rank's end."""

    def __init__(self) -> None:
        self.items: list = []
        self.ends: list[tuple[int, int, float]] = []

    def landed_writes(self, task: Any, first: int = 0, n: int | None = None) -> None:
        items = self.items
        items.append(task)
        items.append(first)
        items.append(n)
        items.append(_LANDED)

    def check_reads(self, task: Any, now_us: float, first: int = 0, n: int | None = None) -> None:
        items = self.items
        items.append(task)
        items.append(first)
        items.append(n)
        items.append(now_us)

    def check_outputs_landed(self, rank: int, now_us: float) -> None:
        self.ends.append((rank, len(self.items) // 4, now_us))


class Forward(CallLog):
    """The calls handed to ``tracker`` as they are made (it logs nothing itself)."""

    def __init__(self, tracker: Any) -> None:
        super().__init__()
        self.tracker = tracker

    def landed_writes(self, task: Any, first: int = 0, n: int | None = None) -> None:
        self.tracker.landed_writes(task, first, n)

    def check_reads(self, task: Any, now_us: float, first: int = 0, n: int | None = None) -> None:
        self.tracker.check_reads(task, now_us, first, n)

    def check_outputs_landed(self, rank: int, now_us: float) -> None:
        self.tracker.check_outputs_landed(rank, now_us)
