"""Human-readable output: the run table and the schedule summary (rich), plus static byte counts."""
from __future__ import annotations

import time
from collections import Counter
from contextlib import contextmanager

from .ir import COMMAND_BYTES, Op, Role, Schedule


def static_bytes(s: Schedule) -> dict[str, list[float]]:
    """Bytes each rank sends per tier, counted from the schedule alone (no backend).

    NVLink: peer regions read by a task (the peer sends) and written by a task (the task's rank
    sends). Network: every PUT's payload. Host: one command record per PUT.
    """
    size = {b.name: b.itemsize for b in s.buffers}
    out = {"nvlink": [0.0] * s.world, "network": [0.0] * s.world, "host": [0.0] * s.world}
    for t in s.tasks:
        if t.op is Op.PUT:
            out["network"][t.rank] += sum(r.size * size[r.buffer] for r in t.reads)
            out["host"][t.rank] += COMMAND_BYTES
        elif t.op in (Op.COPY, Op.REDUCE, Op.GATHER):
            for r in t.reads:
                if r.rank != t.rank:  # a gather moves only its indexed rows
                    rows = len(t.index) if t.op is Op.GATHER else r.shape[0]
                    out["nvlink"][r.rank] += rows * r.shape[1] * size[r.buffer]
            for r in t.writes:
                if r.rank != t.rank:
                    out["nvlink"][t.rank] += r.size * size[r.buffer]
    return out


def _gb(x: float) -> str:
    return f"{x / 1e9:.3f} GB" if x >= 1e7 else f"{x / 1e6:.3f} MB"


def print_result(result: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{result['kernel']} on {result['scenario']} ({result['backend']})", show_header=False)
    cl = result["cluster"]
    shape = result["shape"]
    table.add_row("cluster", f"{cl['nodes']} x {cl['gpus_per_node']} GPUs, {cl['transport']}")
    table.add_row("shape", f"m={shape['m']} n={shape['n']} k={shape['k']} {result['dtype']}")
    src = result["time_source"]
    table.add_row(f"fused time ({src})", f"{result['time_s'] * 1e6:.1f} us ({result['kernels']} kernels)")
    base = result["baseline"]
    shown = base and result["speedup"] is not None  # an emulated baseline is no baseline: left out
    if shown:
        table.add_row(f"baseline time ({src}, {base['name']})", f"{base['time_s'] * 1e6:.1f} us")
    elif base:
        table.add_row(f"baseline ({base['name']})", f"time left out: {base['time_source']} (see the note)")
    if result["speedup"] is not None:
        table.add_row(f"speedup ({src})", f"{result['speedup']:.3f}x")
        paper = result.get("paper_baseline")
        if paper and paper["name"] != base["name"]:
            table.add_row(f"paper's baseline ({paper['name']}, {src})", f"{paper['time_s'] * 1e6:.1f} us, "
                                                                        f"speedup {paper['speedup']:.3f}x")
    tflops = f"{result['tflops_per_gpu']:.1f}"
    if shown:
        tflops += f" (baseline {base['tflops_per_gpu']:.1f})"
    table.add_row(f"TFLOPS per GPU ({src})", tflops)
    pred = result.get("predicted")
    if pred:
        table.add_row("predicted (the simulator, this scenario)", f"fused {pred['time_s'] * 1e6:.1f} us, baseline "
                      f"{pred['baseline_time_s'] * 1e6:.1f} us, speedup {pred['speedup']:.3f}x")
    for tier in ("nvlink", "network", "host"):
        table.add_row(f"{tier} bytes per GPU (max)", _gb(result["bytes_per_gpu"][tier]))
    if result.get("internode") and result["cluster"]["nodes"] > 1:
        table.add_row("inter-node algorithm", result["internode"])
    table.add_row("SMs per role", ", ".join(f"{k} {v}" for k, v in result["roles"].items() if v))
    bd = result["breakdown"]
    if bd:
        table.add_row("breakdown (slowest rank)", f"compute {bd['compute']:.1f} us, exposed comm "
                      f"{bd['exposed_communication']:.1f} us, proxy queueing {bd['proxy_queueing']:.1f} us, "
                      f"fence wait {bd['fence_wait']:.1f} us")
    if result["hazards"]:
        h = result["hazards"][0]
        table.add_row("hazards", f"{len(result['hazards'])}; first: rank {h['rank']} {h['label']} read "
                      f"{h['region']} at {h['time_us']} us before chunk {h['chunk']} landed")
    if result["correct"] is not None:
        detail = f" (rel. error {result['error']:.2e})" if result["error"] is not None else " (hazards)"
        table.add_row("correct", f"{result['correct']}{detail}")
    if result.get("collapsed"):
        table.add_row("collapsed", "yes: one node simulated, all run alike (no hazard checks; --no-collapse: all)")
    if result["events"] is not None:
        table.add_row("simulated events / wall", f"{result['events']} / {result['wall_s']:.2f} s")
    if result.get("sim_core"):
        table.add_row("simulator core", result["sim_core"])
    if result["note"]:
        table.add_row("note", result["note"])
    Console().print(table)


@contextmanager
def progress_bar(after_s: float = 2.0):
    """A ``progress(stage, done, total)`` callback for :func:`mkernel.runner.run` that shows a rich
    progress bar once the run has lasted ``after_s`` seconds (a short run prints nothing extra),
    and clears it at the end (rich's progress module loads only then). Where the output is not a
    terminal (piped, redirected: rich draws nothing there), no bar is started: its module, its
    refresh thread and its renders would be work that nothing shows."""
    start, shown, tasks = time.perf_counter(), [None], {}  # shown: None (not yet), False (no terminal) or the bar

    def progress(stage: str, done: int, total: int) -> None:
        from . import limits

        if limits.live_line():  # the command's own progress line is on screen: the figure goes there
            filled = int(20 * done / total) if total else 0
            limits.detail(f"[{'#' * filled}{'.' * (20 - filled)}] {done:,}/{total:,} tasks" if total else "")
            return
        if shown[0] is False:
            return
        if shown[0] is None:
            if time.perf_counter() - start < after_s:
                return
            from rich import get_console

            if not get_console().is_terminal:
                shown[0] = False
                return
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            shown[0] = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), transient=True)
            shown[0].start()
        label = "building and checking the schedules" if stage == "build" else f"simulating {stage} (tasks)"
        if stage not in tasks:
            tasks[stage] = shown[0].add_task(label, total=total or None)
        shown[0].update(tasks[stage], completed=done, total=total or None)

    try:
        yield progress
    finally:
        if shown[0]:
            shown[0].stop()


def print_schedule(s: Schedule) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    roles = Table(title=f"{s.kernel} / {s.variant}: {s.world} ranks, {len(s.tasks)} tasks")
    for col in ("launch", "role", "SMs", "tasks per rank (max)", "ops"):
        roles.add_column(col)
    for li, launch in enumerate(s.launches):
        for role, sms in launch.sms:
            mine = [t for t in s.tasks if t.launch == li and t.role == role]
            per_rank = Counter(t.rank for t in mine)
            ops = Counter(t.op.value for t in mine)
            roles.add_row(launch.name, role.value, str(sms), str(max(per_rank.values(), default=0)),
                          ", ".join(f"{k} {v}" for k, v in ops.items()))
    console.print(roles)
    tiles = sum(1 for t in s.tasks if t.op in (Op.GEMM, Op.ATTN) and t.rank == 0)
    chunks = sum(1 for t in s.tasks if t.op is Op.PUT and t.rank == 0)
    per = static_bytes(s)
    summary = Table(show_header=False)
    summary.add_row("compute tiles on rank 0 (gemm, attn)", str(tiles))
    summary.add_row("network messages sent by rank 0", str(chunks))
    for tier, values in per.items():
        summary.add_row(f"{tier} bytes sent per GPU (max)", _gb(max(values)))
    summary.add_row("roles with SMs", ", ".join(r.value for r in Role if any(ln.budget(r) for ln in s.launches)))
    console.print(summary)
