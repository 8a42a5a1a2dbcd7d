"""Append-only JSON-lines logs: what a sweep has finished, so that a stopped sweep resumes.

A row is appended (and flushed) as each point finishes. Reading a log checks every row against the
keys the sweep writes, so a log of another kind, or of another sweep, is one clear error naming the
file, the line and the key rather than a wrong resume. A last line cut short (the sweep killed
while writing it) is not an error: that point was not finished, and the line is dropped.
"""
from __future__ import annotations

import json
from pathlib import Path

from .errors import InputError

Spec = dict[str, tuple[type, ...]]


def read_rows(path: Path, required: Spec, what: str) -> list[dict]:
    """The rows of ``path`` (none if it does not exist), each a JSON object with every key of
    ``required`` of one of its types; ``what`` names the log's kind in errors."""
    if not path.exists():
        return []
    if not path.is_file():
        raise InputError(f"{path}: is not a file; the {what} log must be one")
    text = path.read_text()
    lines = text.split("\n")
    if lines and not text.endswith("\n"):  # cut short by a kill: that point is redone
        _drop_partial(path, text)
        lines = lines[:-1]
    rows = []
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}, line {no}: not JSON ({exc.msg}); is this a {what} log? "
                             f"Move it away, or pick another --out") from None
        rows.append(check_row(row, required, f"{path}, line {no}", what))
    return rows


def check_row(row, required: Spec, where: str, what: str) -> dict:
    """``row`` if it is a JSON object with every key of ``required`` of an allowed type."""
    if not isinstance(row, dict):
        raise InputError(f"{where}: a {what} row is a JSON object, got {type(row).__name__}")
    for key, kinds in required.items():
        if key not in row:
            raise InputError(f"{where}: no key {key!r}; this is not a {what} log (move it away, or pick another --out)")
        value = row[key]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            names = " or ".join(k.__name__ for k in kinds)
            raise InputError(f"{where}: key {key!r} is {type(value).__name__} {value!r}, a {what} row has {names}")
    return row


def append_row(path: Path, row: dict) -> None:
    with path.open("a") as f:
        f.write(json.dumps(row) + "\n")


def _drop_partial(path: Path, text: str) -> None:
    keep = text[:text.rfind("\n") + 1]
    path.write_text(keep)
