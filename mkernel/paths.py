"""Where a command writes, checked before it does any work.

A simulation or a GPU run can take minutes; a result lost to a mistyped ``--json`` folder at the end
of it is a surprise. Every subcommand calls :func:`output_file` or :func:`output_folder` on each path
it will write as its first step, and a bad one is one :class:`~mkernel.errors.InputError` (exit 2)
naming the flag, the path and what is wrong.
"""
from __future__ import annotations

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

