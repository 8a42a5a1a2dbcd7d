"""Static SM splits: the fused op at each intra-SM budget of a list, the curve of its latency
normalised to the best, and a per-shape table of the best splits.

``mkernel sweep --comm-sms 1,2,4,8,16,32,64 [--backend hw]`` runs the curve for every grid point (in
the simulator, or on the GPUs at hand), logging each (point, split) run to ``splits.jsonl`` as it
finishes (a stopped sweep resumes there), and writes ``splits.json`` in the output folder;
``mkernel run --splits splits.json`` then takes the table's best split for its scenario's op and
shape. Keys name the cluster scenario, the op and its shape; each entry also holds a digest of the
cluster's parameters, so a scenario of another name with the same cluster (the default scenario and
paper-ib-2x8) finds its entry, and a table never applies to another machine or size.

``tools/studies/hw_splits.py`` (static splits on real NVLink, under torchrun) writes the same table
through :func:`write`, its entries also holding what was measured (``measured``: the op, its size
and shape, the world, each split's time and check), which ``mkernel accuracy --splits`` reads back
with :func:`read_measured`.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from ..errors import InputError
from ..files import append_row, check_row, read_rows
from ..ir import Role
from ..scenario import Scenario

ENTRY = {"best_intra_sms": (int,), "normalised": (dict,)}  # one splits.json entry; "cluster", "measured" optional
MEASURED = {"kernel": (str,), "size": (int,), "shape": (dict,), "world": (int,), "splits": (dict,)}  # its "measured"
LOG = {"point": (str,), "key": (str,), "cluster": (str,), "sms": (int,), "time_s": (int, float)}  # one run


def key(sc: Scenario) -> str:
    w = sc.workload
    return f"{sc.cluster.name}/{sc.cluster.nodes}x{sc.cluster.gpus_per_node}/{w.kernel}/{w.m}x{w.n}x{w.k}"


def digest(sc: Scenario) -> str:
    """The cluster's parameters (not its name), hashed: equal for equal machines."""
    return hashlib.sha1(repr(dataclasses.replace(sc.cluster, name="")).encode()).hexdigest()[:16]


def with_intra(sc: Scenario, sms: int) -> Scenario:
    """The scenario with ``sms`` SMs for the intra role (compute gets the rest)."""
    others = tuple((r, n) for r, n in sc.workload.sms if r is not Role.INTRA)
    return dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, sms=others + ((Role.INTRA, sms),)))


def check_values(sc: Scenario, splits: list[int]) -> None:
    if not splits or any(n < 1 or n >= sc.cluster.gpu.sms for n in splits):
        raise InputError(f"--comm-sms values must be in [1, {sc.cluster.gpu.sms - 1}], got {splits}")


def curve(sc: Scenario, splits: list[int], backend: str = "sim", done: dict[int, float] | None = None,
          record: Callable[[int, float], None] | None = None) -> dict:
    """Fused latency at each intra split (those in ``done`` are not run again; ``record`` hears each
    new one as it finishes), the best split, and the curve normalised to it."""
    from ..runner import run

    check_values(sc, splits)
    times = dict(done or {})
    for n in splits:
        if n not in times:
            times[n] = run(with_intra(sc, n), backend=backend, collapse=backend == "sim")[0]["time_s"]
            if record is not None:
                record(n, times[n])
    times = {n: times[n] for n in splits}
    best = min(times, key=times.get)
    return {"key": key(sc), "cluster": digest(sc), "best": best, "time_s": times,
            "normalised": {n: t / times[best] for n, t in times.items()}}


def read_log(path: Path) -> dict[tuple[str, int], float]:
    """(point key, split) -> fused time of the runs a split sweep logged (see :func:`log_run`)."""
    return {(r["point"], r["sms"]): r["time_s"] for r in read_rows(path, LOG, "split sweep (splits.jsonl)")}


def log_run(path: Path, point: str, sc: Scenario, sms: int, time_s: float) -> None:
    append_row(path, {"point": point, "key": key(sc), "cluster": digest(sc), "sms": sms, "time_s": time_s})


def read_table(path: Path, flag: str = "--splits") -> dict[str, dict]:
    """A splits.json of `mkernel sweep --comm-sms`, every entry checked: one clear error naming the
    file and the key of the first that is not one."""
    try:
        table = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{flag} {path}: not a readable splits table ({exc})") from None
    if isinstance(table, dict) and {"rows", "world"} <= set(table):
        raise InputError(f"{flag} {path}: a splits.json of tools/hw_splits.py before 2026-12-02 (measured curves "
                         f"only, read by `mkernel accuracy --splits`), not a table of `mkernel sweep --comm-sms`")
    if not isinstance(table, dict) or not table:
        raise InputError(f"{flag} {path}: a splits table is a JSON object of entries (key -> best_intra_sms, "
                         f"normalised), as `mkernel sweep --comm-sms` writes; got "
                         f"{'an empty object' if table == {} else type(table).__name__}")
    for k, entry in table.items():
        where = f"{flag} {path}: key {k!r}"
        check_row(entry, ENTRY, where, "splits table")
        if entry["best_intra_sms"] < 1 or not all(isinstance(v, (int, float)) for v in entry["normalised"].values()):
            raise InputError(f"{where}: best_intra_sms must be >= 1 and normalised a table of numbers")
        if "cluster" in entry and not isinstance(entry["cluster"], str):
            raise InputError(f"{where}: key 'cluster' must be a string (the cluster digest)")
    return table


def write(rows: list[dict], path: Path) -> Path:
    """Merge curves into the table at ``path`` (existing entries of other shapes are kept); a row's
    ``measured`` (:func:`measured_row`) goes into its entry."""
    table = read_table(path, "--out") if path.exists() else {}
    for r in rows:
        table[r["key"]] = {"best_intra_sms": r["best"], "cluster": r["cluster"],
                           "normalised": {str(n): v for n, v in r["normalised"].items()},
                           **({"measured": r["measured"]} if "measured" in r else {})}
    path.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    return path


def measured_row(sc: Scenario, size: int, shape: dict, splits: dict[int, dict], **extra) -> dict:
    """A curve measured on one node's GPUs as :func:`write` takes it. ``sc``: the cluster and the
    op's workload (``shape``: the workload fields that make it, ``size``: its grid size);
    ``splits``: each intra-SM budget's measurement (``s``: the fused time in seconds, the slowest
    rank's; its checks beside it); ``extra`` goes into ``measured`` as it is (the fallback's time)."""
    times = {n: x["s"] for n, x in splits.items()}
    best = min(times, key=times.get)
    return {"key": key(sc), "cluster": digest(sc), "best": best,
            "normalised": {n: t / times[best] for n, t in times.items()},
            "measured": {"kernel": sc.workload.kernel, "size": size, "shape": dict(shape),
                         "world": sc.cluster.nodes * sc.cluster.gpus_per_node, "splits": {str(n): x for n, x in splits.items()}, **extra}}


def read_measured(doc, where: str) -> dict:
    """The measured curves of a splits table (entries with ``measured``, all of one world) as
    ``{"world", "rows": [{"kernel", "size", "shape", "splits": {n: {"s", ...}}, ...}]}``, the form
    :mod:`mkernel.studies.accuracy` fits and compares; a file of tools/studies/hw_splits.py from
    before 2026-12-02 (already that form: docs/results/data/nvlink-2026-11-30/) is returned as it is."""
    if isinstance(doc, dict) and {"rows", "world"} <= set(doc):
        return doc
    if not isinstance(doc, dict) or not doc:
        raise InputError(f"{where}: not a splits table of tools/studies/hw_splits.py (a JSON object of entries)")
    rows = []
    for k, entry in doc.items():
        check_row(entry, ENTRY, f"{where}: key {k!r}", "splits table")
        if "measured" not in entry:
            raise InputError(f"{where}: key {k!r} holds no measured curve (a table of `mkernel sweep`, not of "
                             f"tools/studies/hw_splits.py)")
        rows.append(check_row(entry["measured"], MEASURED, f"{where}: key {k!r}, measured", "measured splits"))
    worlds = sorted({r["world"] for r in rows})
    if len(worlds) != 1:
        raise InputError(f"{where}: measured curves of worlds {worlds}; one splits run is one world")
    return {"world": worlds[0], "rows": rows}


def lookup(sc: Scenario, path: Path) -> dict:
    """The table entry for this scenario's cluster, op and shape: its own key, or an entry of the same
    nodes, GPUs, op and shape whose cluster digest is this cluster's. No entry is an error, and so is an
    entry of this key tuned on other cluster parameters (another kernel profile, a recalibrated profile):
    its split would apply silently to a machine it was not tuned for."""
    table = read_table(path)
    mine = key(sc)
    if mine in table:
        if table[mine].get("cluster", digest(sc)) != digest(sc):  # tables before digests: taken as they are
            raise InputError(f"--splits {path}: the entry for {mine} was tuned on other cluster parameters (kernel "
                             f"profile or hardware terms); rerun `mkernel sweep --comm-sms` for this cluster")
        return table[mine]
    suffix = mine.split("/", 1)[1]
    same = [k for k, e in table.items() if k.split("/", 1)[-1] == suffix and e.get("cluster") == digest(sc)]
    if same:
        return table[same[0]]
    shown = ", ".join(sorted(table)[:6]) + (f" and {len(table) - 6} more" if len(table) > 6 else "")
    raise InputError(f"--splits {path}: no entry for {mine} (this cluster, op and shape), nor one for the same "
                     f"machine under another scenario name; the table holds {shown}. A split sweep covers the "
                     f"reference grid's shapes (mkernel sweep --comm-sms ... --scenarios SCENARIO --kernels "
                     f"{sc.workload.kernel}); or run without --splits")


def apply(sc: Scenario, path: Path) -> Scenario:
    """The scenario with its table entry's best split (:func:`lookup`)."""
    return with_intra(sc, lookup(sc, path)["best_intra_sms"])
