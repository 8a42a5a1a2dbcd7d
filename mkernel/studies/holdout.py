"""Out-of-sample check of ``auto``'s per-op fused-estimate factors (``FUSED_SLACK``).

The factors in :mod:`mkernel.builders._auto` were fitted on the very points of the scale-out ``auto``
study (docs/results/2026-12-03-auto.md) on which ``auto`` was then found never to lose, so that
finding says nothing about a point outside them. Here each op's factor is refitted with the same
rule on a training split of the study and judged on the points left out: by topology (IB against
EFA), by node count (2-16 against 32-64), by size (each op's sizes in turn) and by variant (causal
attention and shifted-Zipf MoE against the plain points).

Deciding ``auto``'s pick needs no simulation: the study holds every point's simulated fused time
(``schedule=fused`` forced) and baseline time; the model's two estimates (:func:`estimate`, the
numbers :func:`mkernel.builders._auto.choose` compares) are stored beside them
(``estimates.jsonl``), so a factor's picks are a table lookup (:func:`auto_speedup`).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..files import read_rows
from .sweep import Point, scenario_of

FIT_MARGIN = 1.01  # the original fit's "+1%" over the largest losing point's estimate ratio (_auto.py)
RESULT_ROW = {"key": (str,), "kernel": (str,), "size": (int,), "nodes": (int,), "testbed": (str,),
              "options": (str,), "fused_us": (int, float), "baseline_us": (int, float)}
ESTIMATE_ROW = {"key": (str,), "fused_est_us": (int, float), "baseline_est_us": (int, float)}
FORCED = "schedule=fused"


@dataclass(frozen=True)
class Case:
    """One study point with the fused schedule forced: simulated times and the model's estimates."""

    key: str
    kernel: str
    variant: str  # the point's options less the forced schedule: '', 'causal=1', 'routing=zipf_shifted'
    cluster: str  # 'ib-400g-rail' or 'efa-400g-rail'
    nodes: int
    size: int
    fused_us: float  # simulated
    baseline_us: float  # simulated
    fused_est_us: float  # estimate_us of the fused schedule
    baseline_est_us: float  # estimate_us of the baseline

    @property
    def speedup(self) -> float:
        """The fused schedule's simulated speedup over the baseline (< 1: it loses)."""
        return self.baseline_us / self.fused_us

    @property
    def ratio(self) -> float:
        """The baseline's estimate over the fused one: auto runs fused where factor <= ratio."""
        return self.baseline_est_us / self.fused_est_us


def estimate(point: Point) -> dict:
    """The model's fused and baseline estimates of a study point, built as the study's sim run built
    them (collapsed, grouped, timing): the two numbers ``auto`` compares. No simulation."""
    from .. import runner
    from ..builders._auto import estimate_us

    sc = scenario_of(point)
    fused, baseline = runner.build(sc, folded=True, grouped=True, timing=True)
    if fused is baseline:
        raise InputError(f"{point.key}: estimates need the fused schedule forced (schedule=fused)")
    return {"key": point.key, "fused_est_us": estimate_us(fused, sc.cluster),
            "baseline_est_us": estimate_us(baseline, sc.cluster)}


def load_cases(folder: Path) -> list[Case]:
    """The forced-fused points of ``folder/results.jsonl`` joined with ``folder/estimates.jsonl``;
    a point without its estimate is one clear error (run the tool's ``--estimate`` first)."""
    rows = read_rows(folder / "results.jsonl", RESULT_ROW, "auto study (results.jsonl)")
    est = {r["key"]: r for r in read_rows(folder / "estimates.jsonl", ESTIMATE_ROW, "estimates (estimates.jsonl)")}
    forced = [r for r in rows if FORCED in r["options"].split(",")]
    if not forced:
        raise InputError(f"{folder}/results.jsonl: no point with {FORCED} forced")
    missing = [r["key"] for r in forced if r["key"] not in est]
    if missing:
        raise InputError(f"{folder}/estimates.jsonl: no estimate for {len(missing)} points (first {missing[0]}); "
                         f"write them with tools/studies/auto_holdout.py --estimate")
    return [Case(r["key"], r["kernel"], ",".join(o for o in r["options"].split(",") if o != FORCED),
                 r["testbed"].split("/")[-1].rsplit("-", 1)[0], r["nodes"], r["size"], r["fused_us"],
                 r["baseline_us"], est[r["key"]]["fused_est_us"], est[r["key"]]["baseline_est_us"])
            for r in forced]


RULES = ("losers", "error")  # the original fit, and the bound on the model's error (proposed)


def fit(cases: Iterable[Case], rule: str = "losers", margin: float = FIT_MARGIN) -> float:
    """A factor from ``cases``, rounded up to 0.01, at least 1.0. ``losers`` is the original rule: the
    smallest factor (+1%) that sends every point where the fused schedule lost to the baseline.
    ``error`` bounds the model's error instead: the largest (fused sim / estimate) / (baseline sim /
    estimate) of every point, winner or loser (+1%), so that auto runs fused only where, with the
    worst error seen, the fused time would still be at most the baseline's. It draws on every point,
    not only on the losers near the boundary, and so holds on a point whose error is within those seen."""
    if rule not in RULES:
        raise InputError(f"fit rule {rule!r}; allowed: {', '.join(RULES)}")
    cases = list(cases)
    if rule == "losers":
        worst = max((c.ratio for c in cases if c.speedup < 1), default=0.0)
    else:
        worst = max((c.ratio / c.speedup for c in cases), default=0.0)
    return max(1.0, math.ceil(round(worst * margin * 100, 6)) / 100)


def runs_fused(c: Case, factor: float) -> bool:
    """``auto``'s pick at this factor (builders/_auto.py: fused where estimate x factor <= baseline's)."""
    return c.fused_est_us * factor <= c.baseline_est_us


def auto_speedup(c: Case, factor: float) -> float:
    """What ``auto`` gets over the baseline at this factor: the fused speedup, or 1.0 (the baseline)."""
    return c.speedup if runs_fused(c, factor) else 1.0


@dataclass(frozen=True)
class Outcome:
    """A factor judged on some points: where auto runs fused and loses, and the wins it gives up."""

    factor: float
    points: int
    losses: tuple[float, ...]  # speedups < 1 of the points auto runs fused
    forfeited: tuple[float, ...]  # speedups > 1 of the points auto sends to the baseline

    @property
    def worst(self) -> float:
        return min(self.losses, default=1.0)


def judge(cases: list[Case], factor: float) -> Outcome:
    fused = [c for c in cases if runs_fused(c, factor)]
    return Outcome(factor, len(cases), tuple(sorted(c.speedup for c in fused if c.speedup < 1)),
                   tuple(sorted(c.speedup for c in cases if not runs_fused(c, factor) and c.speedup > 1)))


Split = tuple[str, Callable[[Case], bool]]  # a fold's name and which points it holds out


def splits(cases: list[Case]) -> dict[str, list[Split]]:
    """The held-out splits of one op's points: each split's folds, a fold being the points it holds out
    (the op's other points are its training set)."""
    clusters = sorted({c.cluster for c in cases})
    sizes = sorted({c.size for c in cases})
    variants = "/".join(sorted({c.variant for c in cases if c.variant}))  # per op: one at most
    return {
        "topology": [(f"test {cl}", lambda c, cl=cl: c.cluster == cl) for cl in clusters],
        "nodes": [("fit 2-16, test 32-64", lambda c: c.nodes >= 32)],
        "size": [(f"test size {size}", lambda c, size=size: c.size == size) for size in sizes],
        "variant": [("test plain", lambda c: c.variant == ""),
                    (f"test {variants}", lambda c: c.variant != "")],
    }


@dataclass(frozen=True)
class FoldResult:
    kernel: str
    split: str
    fold: str
    refit: dict[str, Outcome]  # per rule: the factor fitted on the training points, judged on the held-out ones
    committed: Outcome  # the committed (in-sample) factor on the same held-out points


def holdout(cases: list[Case], committed: dict[str, float]) -> list[FoldResult]:
    """Every op, split and fold that has held-out and training points of the op: each rule's factor
    refitted on the training points, and the committed factor, judged on the held-out ones."""
    out = []
    for kernel in sorted({c.kernel for c in cases}):
        mine = [c for c in cases if c.kernel == kernel]
        for split, folds in splits(mine).items():
            for fold, held in folds:
                test, train = [c for c in mine if held(c)], [c for c in mine if not held(c)]
                if test and train:
                    out.append(FoldResult(kernel, split, fold, {rule: judge(test, fit(train, rule)) for rule in RULES},
                                          judge(test, committed[kernel])))
    return out


def recorded_picks(folder: Path) -> dict[str, str]:
    """The schedule each ``auto`` point of the study ran, by its forced-fused twin's key."""
    rows = read_rows(folder / "results.jsonl", RESULT_ROW, "auto study (results.jsonl)")
    return {r["key"] + ("," if r["options"] else "/") + FORCED: r["schedule"]
            for r in rows if FORCED not in r["options"].split(",")}


# -- tables ---------------------------------------------------------------------------------------
def _losses(o: Outcome) -> str:
    return f"{len(o.losses)} (worst {o.worst:.3f})" if o.losses else "0"


def _forfeited(o: Outcome) -> str:
    return f"{len(o.forfeited)} (best {o.forfeited[-1]:.2f})" if o.forfeited else "0"


def _committed():
    from ..builders._auto import FUSED_SLACK
    return FUSED_SLACK


def report(cases: list[Case], committed: dict[str, float] | None = None, picks: dict[str, str] | None = None) -> str:
    """Markdown: per op in sample (each rule fitted on every point), held out (the worst fold of each
    rule), and every fold of every split."""
    committed = committed or _committed()
    folds = holdout(cases, committed)
    kernels = sorted({c.kernel for c in cases})
    out = ["### In sample (every point of the op)", "", "| op | points | fused loses | fused sim/estimate of losers | committed | losers rule, all points | "
           "error rule, all points | losses / wins given up (committed) | wins given up (error rule) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for kernel in kernels:
        mine = [c for c in cases if c.kernel == kernel]
        losers = [c.fused_us / c.fused_est_us for c in mine if c.speedup < 1]
        spread = f"{min(losers):.2f}-{max(losers):.2f}" if losers else "-"
        o, e = judge(mine, committed[kernel]), judge(mine, fit(mine, "error"))
        out.append(f"| {kernel} | {len(mine)} | {len(losers)} | {spread} | {committed[kernel]:.2f} | "
                   f"{fit(mine):.2f} | {e.factor:.2f} | {_losses(o)} / {_forfeited(o)} | {_forfeited(e)} |")
    if picks is not None:
        same = sum(picks.get(c.key) == ("fused" if runs_fused(c, committed[c.kernel]) else "baseline") for c in cases)
        out.append(f"\nauto's recorded picks reproduced from the stored estimates and the committed factors: "
                   f"{same} of {len(cases)}")
    out += ["", "### The model's error per op and variant (sim / estimate)", "",
            "| op | variant | fused sim / estimate | baseline sim / estimate | error (fused / baseline) |",
            "|---|---|---|---|---|"]
    for kernel, variant in sorted({(c.kernel, c.variant) for c in cases}):
        mine = [c for c in cases if (c.kernel, c.variant) == (kernel, variant)]
        cols = [[c.fused_us / c.fused_est_us for c in mine], [c.baseline_us / c.baseline_est_us for c in mine],
                [c.ratio / c.speedup for c in mine]]
        out.append(f"| {kernel} | {variant or 'plain'} | " + " | ".join(f"{min(v):.2f}-{max(v):.2f}" for v in cols) + " |")
    out += ["", "### Held out: per op, over every fold of every split", "",
            "| op | held-out points (all folds) | losers rule: factors | losses | worst | wins given up | "
            "error rule: factors | losses | worst | wins given up |", "|---|---|---|---|---|---|---|---|---|---|"]
    for kernel in kernels:
        mine = [r for r in folds if r.kernel == kernel]
        cells = []
        for rule in RULES:
            got = [r.refit[rule] for r in mine]
            cells += [f"{min(o.factor for o in got):.2f}-{max(o.factor for o in got):.2f}",
                      str(sum(len(o.losses) for o in got)), f"{min(o.worst for o in got):.3f}",
                      str(sum(len(o.forfeited) for o in got))]
        out.append(f"| {kernel} | {sum(r.committed.points for r in mine)} | " + " | ".join(cells) + " |")
    out += ["", "### Held out: every fold", "", "| op | split | fold | held-out points | losers rule: factor | losses | wins given up | "
            "error rule: factor | losses | wins given up | committed: losses | wins given up |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in folds:
        cells = [f"{r.refit[rule].factor:.2f} | {_losses(r.refit[rule])} | {_forfeited(r.refit[rule])}" for rule in RULES]
        out.append(f"| {r.kernel} | {r.split} | {r.fold} | {r.committed.points} | " + " | ".join(cells) +
                   f" | {_losses(r.committed)} | {_forfeited(r.committed)} |")
    return "\n".join(out) + "\n"
