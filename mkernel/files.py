"""The files a command writes and the logs it resumes from, checked before any work.

Output paths: a simulation or a GPU run can take minutes; a result lost to a mistyped ``--json``
folder at the end of it is a surprise. Every subcommand calls :func:`output_file` or
:func:`output_folder` on each path it will write as its first step, and a bad one is one
:class:`~mkernel.errors.InputError` (exit 2) naming the flag, the path and what is wrong.

Logs: a sweep appends (and flushes) a JSON line as each point finishes, so a stopped sweep resumes.
Reading a log checks every row against the keys the sweep writes, so a log of another kind, or of
another sweep, is one clear error naming the file, the line and the key rather than a wrong resume.
A last line cut short (the sweep killed while writing it) is not an error: that point was not
finished, and the line is dropped.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from .errors import InputError


def output_file(path: Path | None, flag: str) -> Path | None:
    """``path`` if a file can be written there: not a folder, its folder exists and is writable, and
    an existing file there is writable. None passes through (the flag was not given)."""
    if path is None:
        return None
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{flag} {path}: is a folder; give a file name, e.g. {path / 'out.json'}")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        what = "is a file" if folder.exists() else "does not exist"
        raise InputError(f"{flag} {path}: the folder {folder} {what}; create it first or write elsewhere")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {path}: the folder {folder} is not writable")
    if path.exists() and not os.access(path, os.W_OK):
        raise InputError(f"{flag} {path}: the file exists and is not writable")
    return path


def output_folder(path: Path | None, flag: str) -> Path | None:
    """``path`` if a folder can be written there: an existing writable folder, or one that can be
    created (with its missing parents) under a writable folder. None passes through."""
    if path is None:
        return None
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            raise InputError(f"{flag} {path}: is a file, not a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise InputError(f"{flag} {path}: the folder is not writable")
        return path
    ancestor = path.absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise InputError(f"{flag} {path}: {ancestor} is a file, so the folder cannot be created")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {path}: cannot create it, {ancestor} is not writable")
    return path

Spec = dict[str, tuple[type, ...]]  # key -> the types a row's value may have


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
