"""The simulator against the paper's quoted speedups (``scenarios/paper/figures.toml``).

Each figure names an op, a testbed and a check on the speedups over the paper's baseline that the
reference grid (mkernel-design.md section 8) predicts with the ``reference`` kernel profile (every
compute role at cuBLAS / SDPA speed, as the paper's kernels run): the peak within 15% of the
paper's, a range inside or within 15% of the paper's, or GEMM+RS's crossover (slower than NCCL
below M = 16K, faster at and above). :func:`run` simulates the grid points the figures need
(:mod:`mkernel.sweep`), :func:`verdicts` grades them, :func:`report` tabulates the error per op and
testbed. ``python tools/studies/paper_check.py`` runs the whole grid; tests/sim/test_paper.py a slice.
"""
from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from . import splits, sweep


@dataclass(frozen=True, slots=True)
class Figure:
    op: str
    testbed: str
    check: str  # "peak", "range" or "crossover"
    quote: str
    value: float = 0.0
    low: float = 0.0
    high: float = 0.0
    min_size: int = 0


def load(path: Path | None = None) -> tuple[list[Figure], float]:
    """The paper's figures and the tolerance (the bundled table by default)."""
    text = path.read_text() if path else (resources.files("mkernel.scenarios") / "paper" / "figures.toml").read_text()
    raw = tomllib.loads(text)
    return [Figure(**f) for f in raw["figure"]], float(raw["tolerance"])


def points(figures: list[Figure], sizes: int | None = None, kernels: str = "reference",
           pairs: set[tuple[str, str]] | None = None, tuned: Path | None = None) -> list[sweep.Point]:
    """The reference grid's points of the figures' ops and testbeds (or of ``pairs`` of op and
    testbed), with a kernel profile (``sizes``: only the first N sizes of each op). ``tuned``: a
    splits table of ``mkernel sweep --comm-sms``; every point of a ``TUNED`` op runs its best split
    (option ``intra_sms``), as ``mkernel run --splits`` would (a point it lacks is an error)."""
    wanted = pairs or {(f.op, f.testbed) for f in figures}
    grid = sweep.reference_grid(testbeds=sorted({t for _, t in wanted}), kernels=sorted({o for o, _ in wanted}))
    by_op: dict[tuple[str, str], list[sweep.Point]] = {}
    for p in grid:
        if (p.kernel, p.testbed) in wanted:
            by_op.setdefault((p.kernel, p.testbed), []).append(p)
    out = []
    for pts in by_op.values():
        shape_fix = [sweep.Point(p.testbed, p.kernel, p.size, _paper_shape(p), (("kernels", kernels),))
                     for p in pts]
        out += shape_fix[:sizes] if sizes else shape_fix
    return [_tuned(p, tuned) for p in out] if tuned else out


TUNED = ("ag_gemm", "gemm_ar", "gemm_rs")  # the ops whose static split a --splits table sets


def _tuned(p: sweep.Point, table: Path) -> sweep.Point:
    """The point with its table entry's best split (an entry tuned on other cluster parameters is an
    error: :func:`mkernel.studies.splits.lookup`)."""
    if p.kernel not in TUNED:
        return p
    entry = splits.lookup(sweep.scenario_of(p), table)
    return dataclasses.replace(p, options=p.options + (("intra_sms", entry["best_intra_sms"]),))


def _paper_shape(p: sweep.Point) -> tuple:
    """MoE with the routing the paper's bench draws: ``multinomial`` (mkernel.routing), seeded per
    size as the bench seeds it (its seed 0 plus the token count, bench/dispatch_gemm_bench.py). The
    draw is over the whole cluster, not node-symmetric, so these points run every node."""
    if p.kernel != "moe_dispatch_gemm":
        return p.shape
    return p.shape + (("routing", "multinomial"), ("routing_seed", p.size))


def run(figures: list[Figure], out: Path, sizes: int | None = None, workers: int = 1,
        tuned: Path | None = None) -> list[dict]:
    """Simulate the figures' points (resumably, in ``out``); returns the sweep rows."""
    return sweep.run_grid(points(figures, sizes, tuned=tuned), out, workers)


@dataclass(frozen=True, slots=True)
class Verdict:
    figure: Figure
    predicted: dict[int, float]  # size -> predicted speedup over the paper's baseline
    ok: bool
    error: float  # peak: predicted / paper - 1; range: the worst end's excess; crossover: sizes on the wrong side
    detail: str


def verdicts(figures: list[Figure], rows: list[dict], tolerance: float) -> list[Verdict]:
    """Grade every figure whose points were simulated."""
    out = []
    for f in figures:
        pred = {r["size"]: r["paper_speedup"] for r in rows
                if r["kernel"] == f.op and r["testbed"] == f.testbed and "error" not in r
                and r.get("kernels") == "reference"}
        if not pred:
            continue
        out.append(_grade(f, pred, tolerance))
    return out


def _grade(f: Figure, pred: dict[int, float], tol: float) -> Verdict:
    if f.check == "peak":
        size, best = max(pred.items(), key=lambda kv: kv[1])
        err = best / f.value - 1.0
        return Verdict(f, pred, abs(err) <= tol, err, f"peak {best:.2f}x at {size} against {f.value:.2f}x")
    if f.check == "range":
        sel = {s: v for s, v in pred.items() if s >= f.min_size}
        if not sel:
            return Verdict(f, pred, False, float("nan"), "no simulated size in the range")
        lo, hi = min(sel.values()), max(sel.values())
        err = max(f.low * (1 - tol) - lo, hi - f.high * (1 + tol), 0.0) / f.high
        below, above = lo / f.low - 1.0, hi / f.high - 1.0
        return Verdict(f, pred, err == 0.0, max(abs(min(below, 0.0)), max(above, 0.0)),
                       f"{lo:.2f}-{hi:.2f}x at sizes >= {f.min_size} against {f.low:.2f}-{f.high:.2f}x")
    wrong = sorted(s for s, v in pred.items() if (v >= 1.0) != (s >= f.min_size))
    return Verdict(f, pred, not wrong, float(len(wrong)),
                   "; ".join(f"{s}: {v:.2f}x" for s, v in sorted(pred.items()))
                   + (f" (wrong side at {wrong})" if wrong else ""))


def report(vs: list[Verdict]) -> str:
    """Markdown: one row per figure, with the error and what was predicted at every size."""
    lines = ["| op | testbed | check | paper | predicted | error | passes |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for v in vs:
        f = v.figure
        paper = {"peak": f"{f.value:.2f}x", "range": f"{f.low:.2f}-{f.high:.2f}x (M >= {f.min_size})",
                 "crossover": f"< 1 below {f.min_size}, > 1 at and above"}[f.check]
        err = f"{v.error:+.0%}" if f.check == "peak" else (f"{v.error:.0%}" if f.check == "range" else f"{v.error:.0f} sizes")
        lines.append(f"| {f.op} | {f.testbed} | {f.check} | {paper} | {v.detail} | {err} | {'yes' if v.ok else '**no**'} |")
    return "\n".join(lines)
