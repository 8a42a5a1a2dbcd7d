"""The NCCL model (:mod:`mkernel.nccl`) against published nccl-tests figures: errors, and the fit.

``scenarios/nccl/published.toml`` holds every figure with its source and quote; this module turns
each curve into fabrics of the model, predicts busbw at each point and reports the relative error
of every point above ``MIN_BYTES`` (the goal: within 10% of each curve). ``fit`` adjusts one
network's :class:`~mkernel.nccl.Terms` to the curves marked ``fit = true`` (a coordinate search
on the mean squared log error), which is how ``mkernel.nccl.TERMS`` was obtained; the other curves
only check it. ``python tools/studies/nccl_check.py`` prints the report (``--fit`` the fitted terms too).
"""
from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass
from importlib import resources

from .. import nccl

MIN_BYTES = 1 << 20
GOAL = 0.10
# The machines of the published curves: NVLink rate through NCCL (GB/s each way: 370 on an H100,
# nccl-tests#212; 368.5 measured on our H200 pair), NIC line rate per GPU, network, platform
# (mkernel.nccl.PLATFORMS: p5 = AMD hosts, aws-ofi-nccl's 75 us, NCCL_BUFFSIZE 8 MiB).
MACHINES = {"p5": (370.0, 50.0, "efa", "p5"), "ib8x400": (370.0, 50.0, "ib", ""),
            "h200x2": (368.5, 50.0, "ib", "")}


@dataclass(frozen=True, slots=True)
class Curve:
    """One published nccl-tests run: points are (nodes, bytes, busbw GB/s)."""

    id: str
    coll: str
    machine: str
    gpus_per_node: int
    nvls: bool
    fit: bool
    source: str
    quote: str
    points: tuple[tuple[int, int, float], ...]
    ll128: bool = True  # False where the run shows NCCL without LL128 (the curve's note says why)

    def fabric(self, nodes: int, terms: nccl.Terms | None = None) -> nccl.Fabric:
        nvl, nic, network, platform = MACHINES[self.machine]
        return nccl.Fabric(nodes, self.gpus_per_node, nvl, nic, network, self.nvls, terms, platform=platform,
                           ll128=self.ll128)

    def network(self, nodes: int) -> str:
        """The key of :data:`mkernel.nccl.TERMS` that a point on ``nodes`` nodes uses."""
        return "nvlink" if nodes == 1 else MACHINES[self.machine][2]


def load(path=None) -> list[Curve]:
    """The curves of the published-figures table (the bundled one by default)."""
    text = (open(path).read() if path else
            (resources.files("mkernel.scenarios") / "nccl" / "published.toml").read_text())
    curves = []
    for c in tomllib.loads(text)["curve"]:
        pts = c["points"]
        if isinstance(c["nodes"], list):
            points = tuple((int(p[0]), int(p[1]), float(p[2])) for p in pts)
        else:
            points = tuple((int(c["nodes"]), int(p[0]), float(p[1])) for p in pts)
        curves.append(Curve(c["id"], c["coll"], c["machine"], c["gpus_per_node"], c["nvls"], c["fit"],
                            c["source"], c["quote"], points, c.get("ll128", True)))
    return curves


@dataclass(frozen=True, slots=True)
class PointError:
    curve: str
    nodes: int
    nbytes: int
    measured: float
    predicted: float
    algo: str
    proto: str

    @property
    def error(self) -> float:
        """Relative error of the predicted busbw."""
        return self.predicted / self.measured - 1.0


def point_errors(curve: Curve, terms: dict[str, nccl.Terms] | None = None, min_bytes: int = MIN_BYTES,
                 network: str | None = None) -> list[PointError]:
    """The model against each point above ``min_bytes`` (only the points of ``network`` if given),
    with ``terms`` (per network) in place of mkernel.nccl.TERMS where given."""
    out = []
    for nodes, nbytes, busbw in curve.points:
        if nbytes < min_bytes or (network and curve.network(nodes) != network):
            continue
        e = nccl.estimate(curve.coll, nbytes, curve.fabric(nodes, (terms or {}).get(curve.network(nodes))))
        out.append(PointError(curve.id, nodes, nbytes, busbw, e.busbw_gb_per_s, e.algo, e.proto))
    return out


def summary(curves: list[Curve], terms: dict[str, nccl.Terms] | None = None) -> list[dict]:
    """Per curve: points checked, worst and mean |error|, whether the 10% goal holds, and the
    algorithms the model picked."""
    rows = []
    for c in curves:
        errs = point_errors(c, terms)
        if not errs:
            continue
        worst = max(errs, key=lambda p: abs(p.error))
        rows.append({"curve": c.id, "coll": c.coll, "fit": c.fit, "points": len(errs),
                     "mean_abs_error": sum(abs(p.error) for p in errs) / len(errs),
                     "max_abs_error": abs(worst.error), "worst": worst, "goal_met": abs(worst.error) <= GOAL,
                     "algos": sorted({f"{p.algo}/{p.proto}" for p in errs})})
    return rows


# Each term's search range, searched on a linear grid.
FIT_RANGES = {"net_efficiency": (0.5, 1.0), "net_message_us": (0.0, 20.0), "net_hop_share": (0.0, 4.0 / 3.0), "a2a_efficiency": (0.5, 1.0),
              "a2a_base_us": (0.0, 400.0), "a2a_peer_us": (0.0, 20.0), "a2a_message_us": (0.0, 8.0),
              "nvls_efficiency": (0.4, 1.0), "nvls_hop_us": (5.0, 120.0)}
FIT_TERMS = {"ib": ("net_efficiency", "a2a_efficiency"),  # IB: peaks only; latencies stay NCCL's
             "efa": ("net_efficiency", "net_message_us", "net_hop_share", "a2a_efficiency", "a2a_base_us", "a2a_peer_us",
                     "a2a_message_us", "nvls_efficiency"),
             "nvlink": ("nvls_efficiency", "nvls_hop_us")}


def loss(points: list[tuple[Curve, int, int, float]], network: str, terms: nccl.Terms) -> float:
    """Mean squared log error of the model with ``terms`` over (curve, nodes, bytes, busbw) points."""
    total = 0.0
    for curve, nodes, nbytes, busbw in points:
        e = nccl.estimate(curve.coll, nbytes, curve.fabric(nodes, terms))
        total += math.log(e.busbw_gb_per_s / busbw) ** 2
    return total / max(1, len(points))


def fit(network: str, curves: list[Curve], rounds: int = 4) -> nccl.Terms:
    """The terms of ``network`` (a key of mkernel.nccl.TERMS) that best fit the points of the
    ``fit = true`` curves on it: each of FIT_TERMS[network] in turn over a 33-step grid in its
    FIT_RANGES, keeping the best, for a few rounds (few terms against tens of points)."""
    points = [(c, nodes, nbytes, busbw) for c in curves if c.fit for nodes, nbytes, busbw in c.points
              if nbytes >= MIN_BYTES and c.network(nodes) == network]
    best = nccl.TERMS[network]
    best_loss = loss(points, network, best)
    for _ in range(rounds):
        for name in FIT_TERMS[network]:
            lo, hi = FIT_RANGES[name]
            for i in range(33):
                value = lo + (hi - lo) * i / 32
                trial = dataclasses.replace(best, **{name: value})
                trial_loss = loss(points, network, trial)
                if trial_loss < best_loss - 1e-12:
                    best, best_loss = trial, trial_loss
    return best


def split(curves: list[Curve], terms: dict[str, nccl.Terms] | None = None) -> dict[str, tuple[int, float]]:
    """Points above MIN_BYTES and their mean |error|, on the fitted curves and on the held-out ones:
    the fit is judged by the second."""
    out = {}
    for name, chosen in (("fitted", [c for c in curves if c.fit]), ("held out", [c for c in curves if not c.fit])):
        errs = [abs(p.error) for c in chosen for p in point_errors(c, terms)]
        out[name] = (len(errs), sum(errs) / max(1, len(errs)))
    return out


def report(curves: list[Curve], terms: dict[str, nccl.Terms] | None = None) -> str:
    """A markdown table of :func:`summary`, then the fitted / held-out split."""
    lines = ["| curve | collective | fit | points > 1 MiB | mean abs error | max abs error (at) | algorithms | "
             "<= 10% |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in summary(curves, terms):
        w = r["worst"]
        at = f"{w.nbytes / (1 << 20):g} MiB" + (f", {w.nodes} nodes" if w.nodes else "")
        lines.append(f"| {r['curve']} | {r['coll']} | {'yes' if r['fit'] else 'no'} | {r['points']} | "
                     f"{r['mean_abs_error']:.1%} | {w.error:+.1%} ({at}) | {', '.join(r['algos'])} | "
                     f"{'yes' if r['goal_met'] else '**no**'} |")
    lines.append("")
    lines += [f"{name}: {n} points, mean abs error {e:.1%}" for name, (n, e) in split(curves, terms).items()]
    return "\n".join(lines)
