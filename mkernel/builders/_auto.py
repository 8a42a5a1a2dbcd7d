"""``auto``'s cost-model choices, from the calibrated profile (the cluster's specs), declared once:
the schedule a run executes (``Workload.schedule``) and GEMM+RS's intra-node SM split
(``Workload.split``). Both backends take them from here: the runner builds the schedule chosen
(:func:`mkernel.runner.build`), and the builders' launch budgets, which the hw lowering expands, hold
the split.

**Which schedule.** A fused schedule overlaps its communication with its compute; it pays for that in
SMs taken from compute, per-tile and per-call interpreter costs, and a pipeline tail. Where no fused
schedule of the op beats its unfused baseline (the op's NCCL-style path: GEMM then an NCCL collective,
an all-gather then the GEMM or attention, ...), ``auto`` runs the baseline instead, so that the op is
never slower than it; the result says which ran (``schedule``). :func:`choose` decides, for both
backends (the runner builds the schedule chosen), in one of two ways:

- **Simulated** (wherever the simulator is installed): the runner simulates both built schedules and
  ``auto`` runs the faster. Nothing is fitted, so there is nothing to fail out of sample; the
  simulator is the model every other figure of the project comes from. It costs the two simulations, which a sim run
  makes anyway (it reports both times: the runner takes auto's runs) and a hw run adds: 0.1-2.3 s at
  the study's 64-node points and 0.1-1.9 s for the flat, whole schedules a hw run builds at 2 x 8,
  from a quarter of the time to build and check the schedules to seven times it
  (docs/results/2026-12-04-auto.md).
- **Estimated** (no simulator): :func:`estimate_us`, a bound per launch of a built schedule with
  :mod:`mkernel.cost`'s task costs: every role's work over its SMs in waves, every rank's network
  bytes over its NICs, a library launch as its model (NCCL's tuner, :mod:`mkernel.nccl`), plus a fused
  launch's call cost and the tail of its last chunk. It leaves out waits (a dependent chain of tasks:
  ring attention's steps, a pipeline's fill), contention and skew, so a fused schedule's simulated time
  is 1.0-5x its estimate, by op, shape and cluster, and a baseline's 0.75-1.9x. So the fused estimate
  is scaled by ``FALLBACK_SLACK``: per op the largest error of the estimates seen on the scale-out
  study ((fused simulated / estimated) / (baseline simulated / estimated)) times ``HELD_OUT_MARGIN``,
  the most any held-out fold's largest error exceeded its training folds' (docs/results/2026-12-04-auto.md,
  :mod:`mkernel.studies.holdout`). It runs fused only where the fused time, with that error, would
  still beat the baseline's, and gives up most fused wins for it (it keeps 26 of the study's 143).

**Which inter-node algorithm** (``Workload.internode = auto`` under ``schedule = auto``, where the
simulator is installed): :func:`choose_internode` builds every algorithm the op has and runs the
fastest simulated one. ``internode = auto`` alone (``schedule = fused``) keeps the rule of
:func:`mkernel.builders._rail.choose`, which needs no simulation but is more than 2% behind the best
algorithm at 26 of the 162 multi-node GEMM-op points of the 2026-12-04 scale-out study, up to 44%
(docs/scaling.md); the simulated choice costs one or two more fused simulations.

**Which split (GEMM+RS).** The node owner's intra role pulls the node's partials of every block it
owns and sums them while the compute role makes the next tiles; the op runs at the slower of the two.
:func:`gemm_rs_intra_sms` picks the intra SMs that make them even (a static 48 served the
communication-heavy shapes and starved compute-heavy ones: docs/results/2026-12-02-gemm-rs-split.md).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from .. import nccl
from ..cluster import Cluster
from ..cost import gemm_us, nbytes, sm_work_us
from ..ir import DTYPE_BYTES, Op, Region, Role, Schedule, Task
from ..problems import Workload
from . import _rail as rail
from ._collectives import REFERENCE_SMS

# Without a simulator (choose): the factor over an op's fused estimate that the baseline's estimate must
# beat for auto to run the fused schedule: the op's largest estimate error on the auto scale-out study
# (docs/results/auto-2026-12-04, its MoE and EFA rows rerun 2026-12-05, every row twice 2026-12-06)
# ((fused sim / estimate) / (baseline sim / estimate), +1%) times HELD_OUT_MARGIN, rounded up
# (mkernel.studies.holdout.fallback_factors; docs/results/2026-12-04-auto.md)
HELD_OUT_MARGIN = 1.41  # the most a held-out fold's largest error passed its training folds' (1.403: GEMM+AR's
# EFA points fitted on IB, 1.410 on the one-run proxy terms; AG+GEMM's, 1.541 before the 2026-12-06 proxy terms,
# is now 1.357)
FALLBACK_SLACK = {"gemm_ar": 3.98, "ag_gemm": 3.52, "gemm_rs": 2.33, "ring_attention": 4.69,
                  "moe_dispatch_gemm": 3.45}
STATIC_INTRA_SMS = 48  # split = "static": the old default, the best measured on an H200 pair (2 GPUs)
SPLIT_STEP = 4  # intra SM counts tried: multiples of this
MIN_INTRA_SMS = 8
MAX_INTRA_SMS = 64  # none beyond it was better, measured (H200 pair: 48-64) or simulated (2x8 ... 16x8)


def choose(w: Workload, c: Cluster, fused: Schedule, baseline: Schedule,
           simulated: Callable[[Schedule], float] | None = None) -> str:
    """``fused`` or ``baseline``: the workload's choice, or ``auto``'s (see the module docstring):
    the faster by ``simulated`` (a schedule's simulated time, us) where the caller can simulate,
    else by the estimates, the fused one scaled by its op's ``FALLBACK_SLACK``."""
    if w.schedule != "auto":
        return w.schedule
    if c.world == 1:  # no communication to overlap: the fused op is the op
        return "fused"
    if simulated is not None:
        return "fused" if simulated(fused) <= simulated(baseline) else "baseline"
    f, b = estimate_us(fused, c), estimate_us(baseline, c)
    return "fused" if f * FALLBACK_SLACK[w.kernel] <= b else "baseline"


def choose_internode(w: Workload, c: Cluster, fused: Schedule,
                     build: Callable[[Workload], Schedule | None],
                     simulated: Callable[[Schedule], float]) -> tuple[Workload, Schedule]:
    """The workload and fused schedule ``schedule = auto`` runs: with ``internode = auto`` on several
    nodes, each algorithm of the op built by ``build`` (None: it cannot be built as ``fused`` was, e.g.
    not collapsible alike; not a candidate) and the fastest by ``simulated`` kept (ties: the rule's
    pick, whose build is ``fused``); the workload names the algorithm chosen. Elsewhere unchanged."""
    if w.internode != "auto" or c.nodes < 2 or len(rail.ALGORITHMS.get(w.kernel, ())) < 2:
        return w, fused
    pick = rail.choose(w, c)
    best = (simulated(fused), pick, fused)
    for alg in rail.ALGORITHMS[w.kernel]:
        s = None if alg == pick else build(replace(w, internode=alg))
        us = simulated(s) if s is not None else best[0]
        if us < best[0]:
            best = (us, alg, s)
    return replace(w, internode=best[1]), best[2]


def estimate_us(s: Schedule, cluster: Cluster) -> float:
    """The model's time of a schedule: its launches one after another, each as long as its busiest
    rank's busiest role, its network share, or its library call (see the module docstring)."""
    c = cluster.for_variant(s.variant)
    itemsize = {b.name: b.itemsize for b in s.buffers}
    queues = s.queues()
    total = 0.0
    for li, launch in enumerate(s.launches):
        if launch.library is not None:
            total += _library_us(launch.library, c)
            continue
        worst = 0.0
        for rank in {r for (r, l, _) in queues if l == li}:
            busy = {role: [t for t in queues.get((rank, li, role), ())] for role in Role}
            worst = max(worst, _launch_us(busy, launch, itemsize, c))
        total += worst + (c.gpu.fused_call_us if s.variant == "fused" else 0.0)
    return total


def _launch_us(tasks: dict[Role, list[Task]], launch, itemsize, c: Cluster) -> float:
    """One rank's part of a launch: each role's work in waves over its SMs, the network's bytes over
    the NICs, and (where the launch both computes and talks) the tail after the last tile."""
    times, tails = [], []
    for role, queue in tasks.items():
        sms = launch.budget(role)
        if not queue or sms < 1:
            continue
        if role is Role.COMPUTE:
            per = c.gpu.fused_tile_us
            work = [(_task_us(t, itemsize, c, sms) + (per if t.op in (Op.GEMM, Op.ATTN) else 0.0), t.count)
                    for t in queue]
        else:
            work = [(_task_us(t, itemsize, c, sms), t.count) for t in queue]
        count = sum(n for _, n in work)
        mean = sum(us * n for us, n in work) / count
        times.append(math.ceil(count / sms) * mean)
        if role is not Role.COMPUTE:
            tails.append(max(us for us, _ in work))
    puts = [t for t in tasks.get(Role.SEND, ()) if t.op is Op.PUT]
    if puts:
        sent = sum(nbytes(t.reads[0], itemsize) * t.count for t in puts)
        messages = sum(t.count for t in puts)
        times.append(sent / (c.nic.gb_per_s * 1e3) + messages * c.nic.per_message_us / c.nic.count)
        tails.append(c.nic.latency_us + max(nbytes(t.reads[0], itemsize) for t in puts) / (c.nic.gb_per_s * 1e3))
    return max(times, default=0.0) + (sum(tails) if tasks.get(Role.COMPUTE) else 0.0)


def _task_us(t: Task, itemsize, c: Cluster, sms: int) -> float:
    if t.op is Op.GEMM:
        return gemm_us(t, itemsize, c, busy=sms)
    return sm_work_us(t, itemsize, c)


def _library_us(library, c: Cluster) -> float:
    """A library call: NCCL's collective by its tuner's model, a dense GEMM in waves of tiles."""
    if library.kind != "gemm":
        return nccl.estimate(library.kind, library.nbytes, nccl.fabric_of(c)).time_us
    m, n, k = library.shape
    tiles = math.ceil(m / 128) * math.ceil(n / 256)
    return math.ceil(tiles / c.gpu.sms) * _gemm_tile_us(min(128, m), min(256, n), k, c, min(tiles, c.gpu.sms))


def _gemm_tile_us(rows: int, cols: int, k: int, c: Cluster, busy: int) -> float:
    task = Task(0, 0, Role.COMPUTE, Op.GEMM, reads=(Region("A", 0, 0, rows, 0, k), Region("B", 0, 0, k, 0, cols)),
                writes=(Region("C", 0, 0, rows, 0, cols),))
    return gemm_us(task, {"A": 2, "B": 2, "C": 2}, c, busy=busy)


def gemm_rs_intra_sms(w: Workload, c: Cluster, send: int, recv: int) -> int:
    """GEMM+RS's intra SMs: ``split = "static"`` the old 48; ``auto`` the count (a multiple of
    SPLIT_STEP) at which the compute role's tiles and the intra role's node reductions take about
    as long, the slower of the two being what the op waits for (the module docstring)."""
    if w.split == "static":
        return STATIC_INTRA_SMS
    f = c.for_variant("fused")
    g, world = c.gpus_per_node, c.world
    rows = w.m // world  # a block; every rank computes every block's tiles, the node owner reduces N blocks
    tm, tn = min(w.tile_m, rows), min(w.tile_n, w.n)
    tiles = math.ceil(rows / tm) * math.ceil(w.n / tn)
    item = DTYPE_BYTES[w.dtype]
    # a reduction's fixed part (round trips, flags) on its SM, and the bytes it pulls, which the node's
    # intra SMs share with the NVLink port (each transfer costing its half-efficiency bytes more)
    fixed = f.nvlink.latency_us + f.gpu.fused_peer_task_us + f.gpu.fused_peer_step_us * math.ceil(
        tm / f.gpu.fused_step_rows) * math.ceil(tn / f.gpu.fused_step_cols)
    pulled = (g - 1) * (tm * tn * item + f.nvlink.half_efficiency_bytes)
    sm_us, port_us = pulled / (f.sm_copy_gb_per_s * 1e3), pulled / (f.nvlink.bw_gb_per_s * 1e3)

    def intra_us(sms: int, reductions: int) -> float:
        return max(reductions * (fixed + sm_us) / sms, reductions * fixed / sms + reductions * port_us)

    best, best_us = None, math.inf
    for intra in range(MIN_INTRA_SMS, min(MAX_INTRA_SMS, c.gpu.sms - send - recv - MIN_INTRA_SMS) + 1, SPLIT_STEP):
        compute = c.gpu.sms - send - recv - intra
        tile_us = _gemm_tile_us(tm, tn, w.k, f, compute) + f.gpu.fused_tile_us
        # the slower of the two roles, then the own block's reductions, which follow its last tile
        us = max(world * tiles * tile_us / compute, intra_us(intra, c.nodes * tiles)) + intra_us(intra, tiles)
        if us < best_us * (1 - 1e-9):
            best, best_us = intra, us
    if best is None:  # a budget too small to try any split (a rank's share of a GPU): the static one,
        return STATIC_INTRA_SMS  # which role_budget scales down like every default
    # role_budget scales the builders' per-132-SM defaults to a smaller GPU (or a rank's share): undo it
    return max(1, round(best * REFERENCE_SMS / c.gpu.sms)) if c.gpu.sms < REFERENCE_SMS else best

