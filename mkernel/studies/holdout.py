"""Out-of-sample checks of ``auto``'s estimate rule (:mod:`mkernel.builders._auto`), the rule it
falls back on where no simulator is installed: the op's fused estimate times a factor against the
baseline's estimate.

Each op's factor is refitted on a training split of the scale-out ``auto`` study and judged on the
points left out: by topology (IB against EFA), by node count (2-16 against 32-64), by size (each
op's sizes in turn) and by variant (causal attention and shifted-Zipf MoE against the plain points).
Three rules: ``losers`` (the 2026-12-03 factors: the smallest that sends every losing training
point to the baseline; fitted on the points it is judged on, it lost out of sample), ``error``
(the largest model error of any training point) and ``margin``, the committed fallback: ``error``
times the held-out margin, how much the largest error of a held-out fold passed its training
folds'; judged on an op, the margin is learned from the other ops' folds alone
(:func:`held_out_margin`), so no number the rule uses saw the points it is judged on.

Deciding a pick needs no simulation: the study holds every point's simulated fused time
(``schedule=fused`` forced) and baseline time; the model's two estimates (:func:`estimate`, the
numbers :func:`mkernel.builders._auto.choose` compares without a simulator) are stored beside them
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
    them (collapsed, grouped, timing): the two numbers ``auto`` compares without a simulator. No
    simulation."""
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


RULES = ("losers", "error", "margin")  # the 2026-12-03 fit, the error bound, and that bound with the margin


def error(c: Case) -> float:
    """The model's error at a point: (fused sim / estimate) / (baseline sim / estimate). The fused
    schedule wins exactly where the estimates' ratio is at least this."""
    return c.ratio / c.speedup


def _up(x: float) -> float:
    """Rounded up to 0.01 (past float noise), at least 1.0."""
    return max(1.0, math.ceil(round(x * 100, 6)) / 100)


def fit(cases: Iterable[Case], rule: str = "losers", margin: float = FIT_MARGIN) -> float:
    """A factor from ``cases``, rounded up to 0.01, at least 1.0. ``losers`` is the 2026-12-03 rule:
    the smallest factor (+1%) that sends every point where the fused schedule lost to the baseline.
    ``error`` bounds the model's error instead: the largest :func:`error` of every point, winner or
    loser (+1%), so that auto runs fused only where, with the worst error seen, the fused time would
    still be at most the baseline's. ``margin`` needs the held-out margin: :func:`fit_margin`."""
    if rule not in RULES[:2]:
        raise InputError(f"fit rule {rule!r}; allowed here: {', '.join(RULES[:2])} (margin: fit_margin)")
    cases = list(cases)
    if rule == "losers":
        worst = max((c.ratio for c in cases if c.speedup < 1), default=0.0)
    else:
        worst = max((error(c) for c in cases), default=0.0)
    return _up(worst * margin)


def fit_margin(cases: Iterable[Case], held_margin: float) -> float:
    """The ``margin`` rule: the ``error`` factor times ``held_margin`` (:func:`held_out_margin`)."""
    return _up(fit(cases, "error") * held_margin)


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


def folds(cases: list[Case]):
    """(kernel, split, fold, held-out points, training points) of every op, split and fold that has both."""
    for kernel in sorted({c.kernel for c in cases}):
        mine = [c for c in cases if c.kernel == kernel]
        for split, parts in splits(mine).items():
            for fold, held in parts:
                test, train = [c for c in mine if held(c)], [c for c in mine if not held(c)]
                if test and train:
                    yield kernel, split, fold, test, train


def excesses(cases: list[Case]) -> list[tuple[float, str, str, str]]:
    """Per fold, how much its held-out points' largest error passes its training points' (< 1: not
    at all), with the op, split and fold; largest first."""
    return sorted(((max(map(error, test)) / max(map(error, train)), kernel, split, fold)
                   for kernel, split, fold, test, train in folds(cases)), reverse=True)


def held_out_margin(cases: list[Case], exclude: str | None = None) -> float:
    """The most any fold's held-out error passed its training error (:func:`excesses`), over the ops
    but ``exclude``, rounded up to 0.01: what an error bound fitted on part of the data must allow
    for the rest."""
    return _up(max((g for g, kernel, _, _ in excesses(cases) if kernel != exclude), default=1.0))


def fallback_factors(cases: list[Case]) -> dict[str, float]:
    """Per op, the ``margin`` rule on every point of the op, with the margin of every op's folds: the
    committed ``FALLBACK_SLACK`` (:mod:`mkernel.builders._auto`)."""
    margin = held_out_margin(cases)
    return {k: fit_margin([c for c in cases if c.kernel == k], margin) for k in sorted({c.kernel for c in cases})}


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


@dataclass(frozen=True)
class FoldResult:
    kernel: str
    split: str
    fold: str
    refit: dict[str, Outcome]  # per rule: the factor fitted on the training points, judged on the held-out ones
    committed: Outcome  # the committed (in-sample) factor on the same held-out points


def holdout(cases: list[Case], committed: dict[str, float]) -> list[FoldResult]:
    """Every op, split and fold that has held-out and training points of the op: each rule's factor
    refitted on the training points (``margin``'s margin from the other ops' folds), and the
    committed factor, judged on the held-out ones."""
    margins = {k: held_out_margin(cases, exclude=k) for k in {c.kernel for c in cases}}
    return [FoldResult(kernel, split, fold, {"losers": judge(test, fit(train)),
                                             "error": judge(test, fit(train, "error")),
                                             "margin": judge(test, fit_margin(train, margins[kernel]))},
                       judge(test, committed[kernel]))
            for kernel, split, fold, test, train in folds(cases)]


# -- tables ---------------------------------------------------------------------------------------
def _losses(o: Outcome) -> str:
    return f"{len(o.losses)} (worst {o.worst:.3f})" if o.losses else "0"


def _forfeited(o: Outcome) -> str:
    return f"{len(o.forfeited)} (best {o.forfeited[-1]:.2f})" if o.forfeited else "0"


def _committed():
    from ..builders._auto import FALLBACK_SLACK
    return FALLBACK_SLACK


def _wins(cases: list[Case], o: Outcome) -> str:
    wins = sum(c.speedup > 1 for c in cases)
    return f"{wins - len(o.forfeited)} of {wins}" if wins else "-"


def report(cases: list[Case], committed: dict[str, float] | None = None) -> str:
    """Markdown: per op in sample (the committed factor and each rule on every point), the model's
    error, the held-out margin, held out per op (every rule over every fold) and every fold."""
    committed = committed or _committed()
    results = holdout(cases, committed)
    kernels = sorted({c.kernel for c in cases})
    out = ["### In sample (every point of the op)", "",
           "| op | points | fused wins | fused loses | committed factor | losses | fused wins kept | "
           "losers rule | error rule |", "|---|---|---|---|---|---|---|---|---|"]
    for kernel in kernels:
        mine = [c for c in cases if c.kernel == kernel]
        o = judge(mine, committed[kernel])
        out.append(f"| {kernel} | {len(mine)} | {sum(c.speedup > 1 for c in mine)} | "
                   f"{sum(c.speedup < 1 for c in mine)} | {committed[kernel]:.2f} | {_losses(o)} | {_wins(mine, o)} | "
                   f"{fit(mine):.2f} | {fit(mine, 'error'):.2f} |")
    out += ["", "### The model's error per op and variant (sim / estimate)", "",
            "| op | variant | fused sim / estimate | baseline sim / estimate | error (fused / baseline) |",
            "|---|---|---|---|---|"]
    for kernel, variant in sorted({(c.kernel, c.variant) for c in cases}):
        mine = [c for c in cases if (c.kernel, c.variant) == (kernel, variant)]
        cols = [[c.fused_us / c.fused_est_us for c in mine], [c.baseline_us / c.baseline_est_us for c in mine],
                [error(c) for c in mine]]
        out.append(f"| {kernel} | {variant or 'plain'} | " + " | ".join(f"{min(v):.2f}-{max(v):.2f}" for v in cols) + " |")
    out += ["", f"### The held-out margin: {held_out_margin(cases):.2f}", "",
            "Per fold, the held-out points' largest error over the training points' (the largest eight):", "",
            "| excess | op | split | fold |", "|---|---|---|---|"]
    out += [f"| {g:.3f} | {kernel} | {split} | {fold} |" for g, kernel, split, fold in excesses(cases)[:8]]
    out += ["", "### Held out: per op, over every fold of every split", "",
            "| op | held-out points (all folds) | rule | factors | losses | worst | wins given up |",
            "|---|---|---|---|---|---|---|"]
    for kernel in kernels:
        mine = [r for r in results if r.kernel == kernel]
        for rule in RULES:
            got = [r.refit[rule] for r in mine]
            out.append(f"| {kernel} | {sum(r.committed.points for r in mine)} | {rule} | "
                       f"{min(o.factor for o in got):.2f}-{max(o.factor for o in got):.2f} | "
                       f"{sum(len(o.losses) for o in got)} | {min(o.worst for o in got):.3f} | "
                       f"{sum(len(o.forfeited) for o in got)} |")
    out += ["", "### Held out: every fold", "", "| op | split | fold | held-out points | " +
            " | ".join(f"{rule}: factor | losses | wins given up" for rule in RULES) + " |",
            "|---|---|---|---|" + "---|" * 3 * len(RULES)]
    for r in results:
        cells = [f"{r.refit[rule].factor:.2f} | {_losses(r.refit[rule])} | {_forfeited(r.refit[rule])}" for rule in RULES]
        out.append(f"| {r.kernel} | {r.split} | {r.fold} | {r.committed.points} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"
