"""``mkernel sweep``: run a grid of sim points (ops x sizes x clusters x options) across worker
processes, resumably, and tabulate and plot it.

A :class:`Point` is one fused-vs-baseline run on the sim backend: a scenario (a bundled name such
as ``scaleout/ib-400g-rail-16x8``, or a file), an op and its shape, and option overrides (any
workload, cluster or cluster-spec key: ``transport=efa_srd``, ``proxy.batch=1``,
``internode=ring``, ``controller=adaptive``). Every point's scenario is built and checked before the
first run, so a bad grid fails at once with one message. Rows are appended to ``results.jsonl`` in
the output folder as points finish (by the parent process only), so a killed sweep resumes where it
stopped; ``results.csv`` and ``results.json`` are rewritten at the end. A point whose run fails (a
deadlock, say) gets a row with its error instead of numbers, and the sweep goes on.
"""
from __future__ import annotations

import csv
import multiprocessing
import dataclasses
import fnmatch
import json
import typing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError, MkernelError
from .. import limits
from ..files import append_row, read_rows
from ..problems import KERNELS, Workload
from ..scenario import CHOICES, SPECS, Scenario, _count, _number, bundled_scenarios, check, load_scenario
from . import splits

TESTBEDS = ("paper-ib-2x8", "paper-efa-2x8")
CONTROLLERS = ("static", "adaptive")  # the sweep-level option ``controller``: the SM split policy
# The sweep-level option ``intra_sms``: a static split, the intra role's SMs (compute gets the rest), as
# ``mkernel run --splits`` applies a table's best (:func:`mkernel.studies.splits.with_intra`)
Option = tuple[str, object]
LOG_ROW = {"key": (str,), "testbed": (str,), "kernel": (str,), "size": (int,)}  # what a resumed log must hold


@dataclass(frozen=True)
class Point:
    """One grid point: a scenario, an op, the size swept (the x axis), the shape and options."""

    testbed: str  # the scenario: a bundled name or a file
    kernel: str
    size: int  # M for the GEMM ops, the sequence per GPU for attention, tokens for MoE
    shape: tuple[tuple[str, object], ...]  # workload overrides (ints, and MoE's routing)
    options: tuple[Option, ...] = ()

    @property
    def key(self) -> str:
        opts = ",".join(f"{k}={v}" for k, v in self.options)
        return f"{self.testbed}/{self.kernel}/{self.size}" + (f"/{opts}" if opts else "")

    def as_json(self) -> dict:
        """The point as a JSON object (recorded simulated times name their points so: tools and tests)."""
        return {"testbed": self.testbed, "kernel": self.kernel, "size": self.size,
                "shape": [list(s) for s in self.shape], "options": [list(o) for o in self.options]}

    @classmethod
    def from_json(cls, d: dict) -> "Point":
        """The point :meth:`as_json` wrote."""
        return cls(d["testbed"], d["kernel"], d["size"], tuple((k, v) for k, v in d["shape"]),
                   tuple((k, v) for k, v in d["options"]))


def reference_grid(testbeds=TESTBEDS, kernels=KERNELS, world: int = 16) -> list[Point]:
    """mkernel-design.md section 8: each op at five sizes, per-GPU shapes as at world 16."""
    sizes = {
        "ag_gemm": [4096, 8192, 16384, 24576, 32768],
        "gemm_rs": [2048, 4096, 8192, 16384, 32768],
        "gemm_ar": [2048, 4096, 8192, 16384, 32768],
        "ring_attention": [768, 1536, 3072, 6144, 12288],
        "moe_dispatch_gemm": [8192, 16384, 32768, 65536, 131072],
    }

    def shape(kernel: str, s: int) -> dict:
        if kernel == "ag_gemm":
            return dict(m=s, n=s // world, k=s)
        if kernel in ("gemm_rs", "gemm_ar"):
            return dict(m=s, n=s, k=s // world)
        if kernel == "ring_attention":  # B = 4 x 16 heads, D = 128; 4 query tiles per head
            return dict(m=s, n=64, k=128, tile_m=max(128, s // 4))
        return dict(m=s, n=2048, k=7168)

    return [Point(tb, kern, s, tuple(shape(kern, s).items()))
            for tb in testbeds for kern in kernels for s in sizes[kern]]


def parse_options(specs: list[str]) -> list[tuple[Option, ...]]:
    """``["proxy.batch=1,8", "transport=ib_rc,efa_srd"]`` -> every combination, as option tuples."""
    combos: list[tuple[Option, ...]] = [()]
    for spec in specs:
        key, sep, values = spec.partition("=")
        if not sep or not key or not values:
            raise InputError(f"--set {spec!r}: write KEY=VALUE[,VALUE...], e.g. proxy.batch=1,8")
        combos = [c + ((key, _value(v)),) for c in combos for v in values.split(",")]
    return combos


def _value(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def apply_options(sc: Scenario, options: tuple[Option, ...], where: str) -> Scenario:
    """The scenario with each (key, value) set: a workload key, a cluster key, ``spec.key``, or a
    sweep-level one (``controller``, ``intra_sms``)."""
    w, c = sc.workload, sc.cluster
    intra = None
    for key, value in options:
        if key == "controller":
            if value not in CONTROLLERS:
                raise InputError(f"{where}: option controller={value!r}; allowed: {', '.join(CONTROLLERS)}")
            continue
        if key == "intra_sms":
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value < c.gpu.sms:
                raise InputError(f"{where}: option intra_sms={value!r} must be an SM count in [1, {c.gpu.sms - 1}]")
            intra = value
            continue
        spec, _, field = key.rpartition(".")
        if spec in SPECS:
            part = getattr(c, spec)
            c = dataclasses.replace(c, **{spec: dataclasses.replace(part, **{field: _typed(type(part), field, value,
                                                                                           key, where)})})
        elif not spec and field in _names(Workload) - {"kernel", "sms", "routes"}:
            w = dataclasses.replace(w, **{field: _typed(Workload, field, value, key, where)})
        elif not spec and field in _names(type(c)) - {"name", "nodes", "gpus_per_node", *SPECS}:
            c = dataclasses.replace(c, **{field: _typed(type(c), field, value, key, where)})
        else:
            allowed = sorted((_names(Workload) - {"kernel", "sms", "routes"})
                             | {"controller", "intra_sms", "transport", "notify", "launch_us"})
            raise InputError(f"{where}: unknown option {key!r}; allowed: {', '.join(allowed)}, or SPEC.KEY "
                             f"with SPEC one of {', '.join(SPECS)}")
    sc = dataclasses.replace(sc, cluster=c, workload=w)
    return sc if intra is None else splits.with_intra(sc, intra)


def _names(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def _typed(cls, field: str, value, key: str, where: str):
    """``value`` checked against the dataclass field's type and, for named choices, the allowed set."""
    if field not in _names(cls):
        raise InputError(f"{where}: unknown option {key!r}; {cls.__name__} keys: {', '.join(sorted(_names(cls)))}")
    kind = typing.get_type_hints(cls)[field]
    if kind is float and isinstance(value, int):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InputError(f"{where}: option {key}={value!r} must be {kind.__name__}")
    if kind is int:  # the scenario files' rules: counts >= 1, rates > 0, costs (*_us) >= 0
        _count(value, f"option {key}", where)
    elif kind is float:
        _number(value, key, where)
    if field in CHOICES and value not in CHOICES[field]:
        raise InputError(f"{where}: option {key}={value!r}; allowed: {', '.join(CHOICES[field])}")
    return value


def expand_scenarios(specs: list[str]) -> list[str]:
    """Scenario arguments with globs matched against the bundled names (an unmatched glob is an error)."""
    out = []
    for spec in specs:
        if any(ch in spec for ch in "*?["):
            hits = fnmatch.filter(bundled_scenarios(), spec)
            if not hits:
                raise InputError(f"--scenarios {spec!r} matches no bundled scenario")
            out += hits
        else:
            out.append(spec)
    return out


def scenario_of(point: Point) -> Scenario:
    """The point's scenario, shape and options applied, checked (a clear error before any run)."""
    sc = load_scenario(point.testbed)
    sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel=point.kernel, **dict(point.shape)))
    sc = apply_options(sc, point.options, f"sweep point {point.key}")
    check(sc, f"sweep point {point.key}")
    return sc


def run_point(point: Point) -> dict:
    """One point on the sim backend (collapsed where exact): a flat row of its numbers."""
    from ..runner import run

    sc = scenario_of(point)
    c = sc.cluster
    row = {"key": point.key, "testbed": point.testbed, "kernel": point.kernel, "size": point.size,
           **dict(point.shape), "nodes": c.nodes, "gpus_per_node": c.gpus_per_node, "transport": c.transport,
           "options": ",".join(f"{k}={v}" for k, v in point.options)}
    try:
        adaptive = dict(point.options).get("controller") == "adaptive"
        result, stats = run(sc, backend="sim", collapse=True, adaptive=adaptive, hazards=False)  # rows hold no hazards
    except MkernelError as exc:
        return {**row, "error": f"{type(exc).__name__}: {exc}"}
    breakdown, proxy = result["breakdown"] or {}, result["proxy"] or {}
    return {**row, "fused_us": result["time_s"] * 1e6, "baseline": result["baseline"]["name"],
            "baseline_us": result["baseline"]["time_s"] * 1e6, "speedup": result["speedup"],
            "paper_baseline": (result["paper_baseline"] or {}).get("name"),
            "paper_baseline_us": (result["paper_baseline"] or {}).get("time_s", 0.0) * 1e6,
            "paper_speedup": (result["paper_baseline"] or {}).get("speedup"), "kernels": result["kernels"],
            "tflops_per_gpu": result["tflops_per_gpu"],
            "baseline_tflops_per_gpu": result["baseline"]["tflops_per_gpu"],
            "nvlink_bytes_per_gpu": result["bytes_per_gpu"].get("nvlink", 0.0),
            "network_bytes_per_gpu": result["bytes_per_gpu"].get("network", 0.0),
            "host_bytes_per_gpu": result["bytes_per_gpu"].get("host", 0.0),
            "compute_us": breakdown.get("compute"), "exposed_comm_us": breakdown.get("exposed_communication"),
            "proxy_busy_us": proxy.get("proxy_busy_us"), "fence_wait_us": proxy.get("fence_wait_us"),
            "batches": proxy.get("batches"), "commands": proxy.get("commands"),
            "collapsed": stats.metrics.get("collapsed"), "events": result["events"], "sim_wall_s": result["wall_s"],
            "internode": result.get("internode"), "schedule": result.get("schedule")}


def run_grid(points: list[Point], out: Path, workers: int = 1,
             progress: Callable[[Point, dict], None] | None = None) -> list[dict]:
    """Run every point not yet in ``out/results.jsonl`` on ``workers`` processes; return all rows."""
    world = {p: scenario_of(p).cluster.world for p in points}  # every scenario is checked before the first run
    out.mkdir(parents=True, exist_ok=True)
    log = out / "results.jsonl"
    rows = read_rows(log, LOG_ROW, "sweep (results.jsonl)")
    done = {r["key"] for r in rows}
    # the largest clusters first, so no worker is left with a long point at the end
    todo = sorted((p for p in dict.fromkeys(points) if p.key not in done), key=lambda p: -world[p])

    def record(p: Point, row: dict) -> None:
        append_row(log, row)
        rows.append(row)
        if progress is not None:
            progress(p, row)

    if workers <= 1:
        for p in todo:
            record(p, run_point(p))
        return rows
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(run_point, p): p for p in todo}
        try:
            try:  # bounded by the deadline itself too: under load the alarm was seen to miss this wait
                for future in as_completed(futures, timeout=limits.time_left()):
                    record(futures[future], future.result())
            except FuturesTimeout:
                limits.expire_now()
                raise
        except BaseException:  # a deadline or ^C: stop the workers now, not after their points
            pool.shutdown(wait=False, cancel_futures=True)
            for child in multiprocessing.active_children():
                child.kill()
            raise
    return rows


def write_table(rows: list[dict], out: Path) -> Path:
    """``results.csv`` (one row per point, sorted) and ``results.json`` (the same rows)."""
    rows = sorted(rows, key=lambda r: (r["testbed"], r["kernel"], r["size"], r.get("options", "")))
    path = out / "results.csv"
    keys = list(dict.fromkeys(k for row in rows for k in row))
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    (out / "results.json").write_text(json.dumps(rows, indent=1))
    return path


def plot(rows: list[dict], out: Path) -> Path | None:
    """One panel per op: speedup (left axis) and TFLOPS per GPU (right axis) against size."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = [r for r in rows if "error" not in r]
    kernels = [k for k in KERNELS if any(r["kernel"] == k for r in rows)]
    if not kernels:
        return None
    fig, axes = plt.subplots(1, len(kernels), figsize=(4.2 * len(kernels), 3.6), squeeze=False)
    twins = []
    series = sorted({(r["testbed"], r.get("options", "")) for r in rows})
    for ax, kernel in zip(axes[0], kernels):
        twin = ax.twinx()
        twins.append(twin)
        for (testbed, opts), style in zip(series, ("-", "--", ":", "-.") * 8):
            pts = sorted((r for r in rows if r["kernel"] == kernel and (r["testbed"], r.get("options", "")) ==
                          (testbed, opts)), key=lambda r: r["size"])
            xs, name = [r["size"] for r in pts], testbed + (f" {opts}" if opts else "")
            ax.plot(xs, [r["speedup"] for r in pts], "o" + style, color="C0", label=f"speedup {name}")
            twin.plot(xs, [r["tflops_per_gpu"] for r in pts], "s" + style, color="C1", label=f"fused TFLOPS {name}")
            twin.plot(xs, [r["baseline_tflops_per_gpu"] for r in pts], "x" + style, color="C2",
                      label=f"baseline TFLOPS {name}")
        ax.axhline(1.0, color="grey", lw=0.5)
        ax.set_xscale("log", base=2)
        ax.set_title(kernel)
        ax.set_xlabel("sequence per GPU" if kernel == "ring_attention" else "M")
        ax.set_ylabel("speedup (baseline / fused)", color="C0")
        twin.set_ylabel("TFLOPS per GPU", color="C1")
    (h1, l1), (h2, l2) = axes[0][0].get_legend_handles_labels(), twins[0].get_legend_handles_labels()
    fig.legend(h1 + h2, l1 + l2, loc="lower center", ncol=3, fontsize=7)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    path = out / "speedup.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
