"""The ``auto`` study's tables: at every point, what ``auto`` ran beside the fused schedule forced and
the baseline (``study.auto_points``: each point twice, ``schedule=auto`` and ``schedule=fused``).

``auto`` decides by simulating both schedules (:func:`mkernel.builders._auto.choose`), so at every
point it should run the faster of the two its forced twin reports, or beat both by a fused schedule on
an inter-node algorithm the twin's rule did not pick (``internode = auto`` simulates every one):
:func:`pairs` joins the twins and :func:`mismatches` names any point where it did neither. :func:`summary` counts, per op, variant and
cluster, the fused wins ``auto`` kept and gave up and where it lost; :func:`no_fused_win` lists the
points where no fused schedule beats the baseline (docs/results/2026-12-04-auto.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..files import read_rows
from .holdout import FORCED

AUTO = "schedule=auto"
ROW = {"key": (str,), "kernel": (str,), "size": (int,), "nodes": (int,), "testbed": (str,), "options": (str,),
       "fused_us": (int, float), "baseline_us": (int, float), "schedule": (str,), "sim_wall_s": (int, float),
       "internode": (str, type(None))}
TOLERANCE = 1e-9  # relative: the same simulation twice gives the same time to rounding


@dataclass(frozen=True)
class Pair:
    """One study point: the fused schedule forced, and what ``auto`` ran."""

    kernel: str
    variant: str  # the options less the schedule: '', 'causal=1', 'routing=zipf_shifted'
    cluster: str
    nodes: int
    size: int
    fused_us: float  # forced
    baseline_us: float
    auto_us: float
    auto_ran: str  # 'fused' or 'baseline'
    internode: str | None  # the inter-node algorithm of the forced fused run (None where there is none)
    auto_internode: str | None  # the one auto's fused schedule ran
    sim_wall_s: float  # the forced run's two simulations: what auto's choice costs where it simulates

    @property
    def speedup(self) -> float:
        """The fused schedule's speedup over the baseline (< 1: it loses)."""
        return self.baseline_us / self.fused_us

    @property
    def auto_speedup(self) -> float:
        return self.baseline_us / self.auto_us


def _variant(options: str, schedule: str) -> str:
    return ",".join(o for o in options.split(",") if o and o != schedule)


def pairs(folder: Path) -> list[Pair]:
    """Every point of ``folder/results.jsonl`` with both twins; a point missing one is one clear error."""
    rows = read_rows(folder / "results.jsonl", ROW, "auto study (results.jsonl)")
    twins: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        schedule = FORCED if FORCED in r["options"].split(",") else AUTO if AUTO in r["options"].split(",") else None
        if schedule is not None:
            twins.setdefault((r["testbed"], r["kernel"], r["size"], _variant(r["options"], schedule)), {})[schedule] = r
    lone = [key for key, got in twins.items() if len(got) < 2]
    if not twins or lone:
        raise InputError(f"{folder}/results.jsonl: {len(lone)} of {len(twins)} points lack their auto or forced-fused "
                         f"twin (first {lone[0] if lone else 'none'}): rerun the study's auto_points")
    out = []
    for (testbed, kernel, size, variant), got in twins.items():
        f, a = got[FORCED], got[AUTO]
        out.append(Pair(kernel, variant, testbed.split("/")[-1].rsplit("-", 1)[0], f["nodes"], size, f["fused_us"],
                        f["baseline_us"], a["fused_us"], a["schedule"], f["internode"], a["internode"], f["sim_wall_s"]))
    return sorted(out, key=lambda p: (p.kernel, p.variant, p.cluster, p.size, p.nodes))


def mismatches(ps: list[Pair]) -> list[Pair]:
    """The points where ``auto`` neither ran the faster of the two schedules, at the faster's time, nor
    beat both with a fused schedule on another inter-node algorithm than the forced run's."""
    def wrong(p: Pair) -> bool:
        faster = "fused" if p.fused_us <= p.baseline_us else "baseline"
        best = min(p.fused_us, p.baseline_us)
        if p.auto_us < best * (1 - TOLERANCE):
            return p.auto_ran != "fused" or p.auto_internode == p.internode
        return p.auto_ran != faster or p.auto_us > best * (1 + TOLERANCE)
    return [p for p in ps if wrong(p)]


def no_fused_win(ps: list[Pair]) -> list[Pair]:
    """The points where the fused schedule does not beat the baseline (auto runs the baseline)."""
    return [p for p in ps if p.speedup <= 1]


def summary(ps: list[Pair]) -> str:
    """Markdown: per op, variant and cluster, the fused wins auto kept, where it ran the baseline and
    where it lost, and what its choice cost (the two simulations)."""
    out = ["| op | variant | cluster | points | fused wins | kept by auto | auto ran the baseline | auto < 1.0 | "
           "worst auto | fused speedups where no fused schedule wins | two simulations, s (max) |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple, list[Pair]] = {}
    for p in ps:
        groups.setdefault((p.kernel, p.variant, p.cluster), []).append(p)
    for (kernel, variant, cluster), mine in groups.items():
        wins = [p for p in mine if p.speedup > 1]
        kept = [p for p in wins if p.auto_ran == "fused"]
        losses = [p for p in mine if p.auto_speedup < 1 - TOLERANCE]
        lost = sorted(round(p.speedup, 2) for p in no_fused_win(mine))
        spread = f"{lost[0]:.2f}-{lost[-1]:.2f}" if lost else "-"
        out.append(f"| {kernel} | {variant or '-'} | {cluster} | {len(mine)} | {len(wins)} | {len(kept)} | "
                   f"{sum(p.auto_ran == 'baseline' for p in mine)} | {len(losses)} | "
                   f"{min(p.auto_speedup for p in mine):.3f} | {spread} | "
                   f"{max(p.sim_wall_s for p in mine):.2f} |")
    wins = [p for p in ps if p.speedup > 1]
    kept = sum(p.auto_ran == "fused" for p in wins)
    out.append(f"\nFused wins kept: {kept} of {len(wins)}; points where auto runs slower than the baseline: "
               f"{sum(p.auto_speedup < 1 - TOLERANCE for p in ps)} of {len(ps)}; auto's pick differs from the faster "
               f"forced run at {len(mismatches(ps))}.")
    return "\n".join(out) + "\n"


def losing_table(ps: list[Pair]) -> str:
    """Markdown: every point where no fused schedule wins, by op, variant and cluster: node counts and
    sizes with the fused speedup."""
    out = ["| op | variant | cluster | size | fused speedup at 2 / 4 / 8 / 16 / 32 / 64 nodes (- : fused wins) |",
           "|---|---|---|---|---|"]
    rows: dict[tuple, dict[int, float]] = {}
    for p in ps:
        rows.setdefault((p.kernel, p.variant, p.cluster, p.size), {})[p.nodes] = p.speedup
    for (kernel, variant, cluster, size), by in rows.items():
        if any(s <= 1 for s in by.values()):
            cells = " / ".join(f"{by[n]:.2f}" if by[n] <= 1 else "-" for n in sorted(by))
            out.append(f"| {kernel} | {variant or '-'} | {cluster} | {size} | {cells} |")
    return "\n".join(out) + "\n"
