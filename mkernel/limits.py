"""How big and how long a run may get before mkernel refuses or stops it: the one place the limits
are declared.

A schedule is a list of tasks, and every phase (build, validate, simulate) costs memory and time in
proportion to it; data mode adds real arrays. ``mkernel run --m 10000000`` would otherwise grow
until the machine runs out of memory. So before building, :func:`check_tasks` estimates the task
count from the shape (no schedule is built) and refuses a run whose estimated memory passes
:data:`MEMORY_LIMIT_BYTES`, with the figures and what to do; after building and before any array is
allocated, :func:`check_data` does the same for the arrays of data mode and of the hw backend's
host-side inputs and oracle. ``force`` (``--force``) goes on anyway.

The estimate is a fit, per op, of the fused and baseline task counts of real builds: a term per
compute tile (or attention block, or MoE expert tile and token block) and one per pair of ranks
(the collectives' per-peer steps); tests/test_cli_limits.py holds it within a factor of 2.5 of the
real count. As the simulator groups tasks, the fit's coefficients fall and the limit admits more.

Time: :func:`bounded` wraps a subcommand that simulates at length or runs GPU work. It shows the
current step on stderr (a rich spinner with the elapsed time, on a terminal) and, when its
``--timeout`` (default :data:`TIMEOUT_S`) passes, stops the work where it is and raises
:class:`~mkernel.errors.DeadlineExceeded` (exit 1) naming the step that was running and what the
running parts were doing: each object in the interrupted call stack with a ``deadline_status()``
method says its piece (the simulator's model: its schedule, simulated time and the ranks still
running; the GPU launcher: each rank's last step; a sweep: the points done). Leaving the stack
stops every rank (the launcher kills its rank processes on the way out; a sweep kills its
workers). :func:`step` is how library code names what it is doing; outside :func:`bounded` it only
records it.
"""
from __future__ import annotations

import math
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .cluster import Cluster
from .errors import DeadlineExceeded, InputError
from .problems import Workload

MEMORY_LIMIT_BYTES = 4_000_000_000  # what a run may take before it is refused (--force goes on)
WHOLE_DATA_BYTES = 256_000_000  # sim data mode on every element up to this; sampled rows and columns beyond
# --timeout's default per subcommand (seconds; 0: none): past it the command stops every rank and exits 1
TIMEOUT_S = {"run": 1200, "show": 600, "explore": 600, "sweep": 7200, "selftest": 600, "calibrate": 1800, "bench": 3600}
BYTES_PER_TASK = 2500  # build + validation + simulation, per task (2 x 8 GEMM+AR, 28k-451k tasks)
US_PER_TASK = 150  # wall time per task on a 2-core machine like CI's, same runs (a rough guide)

# tasks ~= world * (PER_UNIT * units per rank) + PER_PAIR * world^2 + PER_RANK * world, fused and
# baseline together (fitted on 28-35 builds per op from 1 x 1 to 4 x 8 GPUs)
FIT = {"gemm_ar": (2.71, 17.2, 0.0), "gemm_rs": (2.30, 10.8, 0.0), "ag_gemm": (2.14, 5.30, 5.92),
       "ring_attention": (3.46, 31.8, 0.0), "moe_dispatch_gemm": (1.19, 2.22, 89.3)}


@dataclass(frozen=True)
class Estimate:
    tasks: int
    built_ranks: int  # ranks whose tasks are built (fewer than the world when a run is folded)

    @property
    def bytes(self) -> int:
        return self.tasks * BYTES_PER_TASK


def _units(w: Workload, c: Cluster) -> float:
    """Compute units per rank: GEMM tiles, attention blocks, or MoE expert tiles and token blocks."""
    world = c.world
    cols = math.ceil(w.n / w.tile_n)
    if w.kernel in ("gemm_ar", "gemm_rs"):
        return math.ceil(w.m / w.tile_m) * cols
    if w.kernel == "ag_gemm":
        return world * math.ceil(w.m / world / w.tile_m) * cols
    if w.kernel == "ring_attention":
        return w.n * math.ceil(w.m / w.tile_m) * world
    rows = w.m * w.topk / world
    return (rows / w.tile_m + w.experts / world) * cols + rows / 16


def _extra(w: Workload, c: Cluster) -> float:
    """Tasks per rank the fit does not see: ring attention's node-ring copies beyond those of the
    128-row KV tiles it was fitted with (one copy per KV tile of every slice but the last hop's)."""
    if w.kernel != "ring_attention" or w.kv_tile >= 128:
        return 0.0
    return w.n * c.nodes * (c.gpus_per_node - 1) * (math.ceil(w.m / w.kv_tile) - math.ceil(w.m / 128))


def estimate(w: Workload, c: Cluster, folded_nodes: int = 0, local: bool = False) -> Estimate:
    """The estimated task count of the fused and baseline schedules; ``folded_nodes`` > 0: built for
    that many nodes alone (a collapsed run of a node-symmetric op), and with ``local`` for their
    local rank 0 alone (``ScheduleBuilder.local_fold``)."""
    per_unit, per_pair, per_rank = FIT[w.kernel]
    built = c.world if not folded_nodes else min(c.world, folded_nodes * (1 if local else c.gpus_per_node))
    tasks = built * (per_unit * _units(w, c) + per_pair * c.world + per_rank + _extra(w, c))
    return Estimate(int(tasks), built)


def _size(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n / 1e3:.0f} kB"


def _duration(us: float) -> str:
    s = us * 1e-6
    return f"{s / 3600:.1f} h" if s >= 3600 else f"{s / 60:.1f} min" if s >= 60 else f"{s:.0f} s"


def check_tasks(w: Workload, c: Cluster, folded_nodes: int = 0, force: bool = False, foldable: int = 0,
                local: bool = False) -> Estimate:
    """Refuse (unless ``force``) a run whose estimated schedules pass the memory limit. ``foldable``:
    how many nodes a collapsed run would build (0: the nodes do not all run alike, so ``--collapse``
    cannot help and is not offered); ``local``: the folded build is of local rank 0 alone."""
    est = estimate(w, c, folded_nodes, local)
    if est.bytes > MEMORY_LIMIT_BYTES and not force:
        fold, why = "", ""
        if foldable and not folded_nodes:
            fold = f"--collapse (simulate one node when all are alike: about {estimate(w, c, foldable).tasks:,} tasks), "
        elif not folded_nodes and c.nodes > 1:
            why = f" (--collapse cannot help: the nodes of {w.kernel} do not all run alike on this cluster)"
        raise InputError(
            f"{w.kernel} {w.m}x{w.n}x{w.k} on {c.nodes}x{c.gpus_per_node} GPUs would build about {est.tasks:,} tasks "
            f"(estimated, fused and baseline), about {_size(est.bytes)} of memory and {_duration(est.tasks * US_PER_TASK)} "
            f"here; the limit is {_size(MEMORY_LIMIT_BYTES)} (about {MEMORY_LIMIT_BYTES // BYTES_PER_TASK:,} tasks). "
            f"Options{why}: {fold}a smaller shape or cluster, larger tiles (workload.tile_m, tile_n), or --force to go on")
    return est


def check_data(what: str, nbytes: float, force: bool = False, hint: str = "") -> None:
    """Refuse (unless ``force``) ``nbytes`` of arrays for ``what`` beyond the memory limit."""
    if nbytes > MEMORY_LIMIT_BYTES and not force:
        raise InputError(f"{what} would take about {_size(nbytes)} of memory; the limit is "
                         f"{_size(MEMORY_LIMIT_BYTES)}. Options: {hint + ', ' if hint else ''}a smaller shape, "
                         f"or --force to go on")


# -- time: the deadline and the progress line --------------------------------------------------
_state = {"step": "starting", "since": time.monotonic(), "live": False, "detail": ""}


def step(text: str) -> None:
    """Name what the command is doing now (shown in the progress line and in a deadline error)."""
    _state["step"], _state["since"], _state["detail"] = text, time.monotonic(), ""


def live_line() -> bool:
    """Whether a command's progress line is on screen (rich allows one live display at a time, so a
    progress bar shows inside it, through :func:`detail`)."""
    return _state["live"]


def detail(text: str) -> None:
    """A progress figure for the current step, shown after it in the progress line."""
    _state["detail"] = text


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
        more = f" {_state['detail']}" if _state["detail"] else ""
        return f"{self.what}: {_state['step']}{more} ({time.monotonic() - self.start:.0f} s)"


def time_left() -> float | None:
    """Seconds until the running deadline (None: none), for a wait that must not outlast it even
    where the alarm's signal cannot interrupt it."""
    deadline = _state.get("deadline")
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def expire_now() -> None:
    """Raise the running deadline's error now (a bounded wait ran out before its alarm landed)."""
    if _state.get("expire") is not None:
        _state["expire"]()


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
        _state["deadline"], _state["expire"] = start + timeout_s, lambda: expire(None, sys._getframe(1))
    live = None
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.live import Live
        from rich.spinner import Spinner

        live = Live(Spinner("dots", _Line(what, start)), console=Console(stderr=True), transient=True,
                    refresh_per_second=4)
        live.start()
        _state["live"] = True
    try:
        yield
    finally:
        if live is not None:
            live.stop()
            _state["live"] = False
        if armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            _state["deadline"] = _state["expire"] = None
