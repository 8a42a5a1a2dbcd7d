"""Static SM splits (issue 7): the fused op at each intra-SM budget of a list, the curve of its
latency normalised to the best, and a per-shape table of the best splits.

``mkernel sweep --comm-sms 1,2,4,8,16,32,64 [--backend hw]`` runs the curve for every grid point (in
the simulator, or on the GPUs at hand) and writes
``splits.json`` in the output folder; ``mkernel run --splits splits.json`` then takes the table's
best split for its scenario's op and shape (the default when adaptive mode is off). Keys name the
cluster scenario, the op and its shape, so a table never applies to another machine or size.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ..errors import InputError
from ..ir import Role
from ..scenario import Scenario


def key(sc: Scenario) -> str:
    w = sc.workload
    return f"{sc.cluster.name}/{sc.cluster.nodes}x{sc.cluster.gpus_per_node}/{w.kernel}/{w.m}x{w.n}x{w.k}"


def with_intra(sc: Scenario, sms: int) -> Scenario:
    """The scenario with ``sms`` SMs for the intra role (compute gets the rest)."""
    others = tuple((r, n) for r, n in sc.workload.sms if r is not Role.INTRA)
    return dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, sms=others + ((Role.INTRA, sms),)))


def curve(sc: Scenario, splits: list[int], backend: str = "sim") -> dict:
    """Fused latency at each intra split, the best split, and the curve normalised to it."""
    from ..runner import run

    if not splits or any(n < 1 or n >= sc.cluster.gpu.sms for n in splits):
        raise InputError(f"--comm-sms values must be in [1, {sc.cluster.gpu.sms - 1}], got {splits}")
    times = {n: run(with_intra(sc, n), backend=backend, collapse=backend == "sim")[0]["time_s"] for n in splits}
    best = min(times, key=times.get)
    return {"key": key(sc), "best": best, "time_s": times, "normalised": {n: t / times[best] for n, t in times.items()}}


def write(rows: list[dict], path: Path) -> Path:
    """Merge curves into the table at ``path`` (existing entries of other shapes are kept)."""
    table = json.loads(path.read_text()) if path.exists() else {}
    for r in rows:
        table[r["key"]] = {"best_intra_sms": r["best"], "normalised": {str(n): v for n, v in r["normalised"].items()}}
    path.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    return path


def apply(sc: Scenario, path: Path) -> Scenario:
    """The scenario with its table entry's best split, or unchanged when the table has none."""
    try:
        table = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"--splits {path}: not a readable splits table ({exc})") from None
    entry = table.get(key(sc)) if isinstance(table, dict) else None
    if not isinstance(entry, dict) or not isinstance(entry.get("best_intra_sms"), int):
        return sc
    return with_intra(sc, entry["best_intra_sms"])
