"""Which simulator core runs: the event core compiled to C by mypyc at install, or the same source as Python.

The modules of :data:`CORE` (the event loop, the SMs' dispatch, the signal board, flows, the network)
are most of a run's time. ``setup.py`` compiles them with mypyc from their own source where it can
(mypyc, a C compiler) and records each source's digest in ``_built.py`` beside them; a compiled
module sits beside its ``.py`` and Python's import takes it first. The compiled core gives the same
results to the bit (tests/sim/test_native.py runs both) in about a fifth fewer instructions.

:func:`choose` (called by ``mkernel.sim`` before it imports any of them) makes the Python source
load instead where the compiled modules were built from other sources (one edited or checked out
since the build: a warning says so), where the compiled set is incomplete, or where the process asks for Python with
``python -X mkernel-pure``: profilers, tracers and tests that patch the core's classes need it. It
needs only the standard library: ``setup.py`` reads :data:`CORE` from this file before any install.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.machinery
import importlib.util
import sys
import warnings
from pathlib import Path

CORE = ("environment", "signals", "runs", "sms", "dispatch", "engine", "flows", "maxmin", "network", "proxy", "tiles",
        "nvplan", "calllog")
PURE_OPTION = "mkernel-pure"  # python -X mkernel-pure: run the Python source of the core
HERE = Path(__file__).parent
PACKAGE = "mkernel.sim"
SHARED = "core__mypyc"  # the compiled modules' shared part (setup.py's GROUP)

state = "python (not built)"  # what choose() found, for results and errors: "compiled (mypyc)" or "python (why)"


def digest(path: Path) -> str:
    """A source file's digest as the build records it."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _built() -> dict[str, str]:
    """The digests of the sources the compiled modules were built from (none where nothing was built)."""
    path = HERE / "_built.py"
    if not path.exists():
        return {}
    tree = ast.parse(path.read_text())
    (value,) = [node.value for node in tree.body if isinstance(node, ast.Assign) and node.targets[0].id == "SOURCES"]
    return ast.literal_eval(value)


def _compiled(name: str) -> bool:
    return any((HERE / f"{name}{suffix}").exists() for suffix in importlib.machinery.EXTENSION_SUFFIXES)


class _Source:
    """A finder, ahead of the others, that loads each core module from its ``.py`` (not the compiled
    file beside it)."""

    @staticmethod
    def find_spec(fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != PACKAGE or name not in CORE:
            return None
        return importlib.util.spec_from_file_location(fullname, HERE / f"{name}.py")


def problem() -> str | None:
    """Why the compiled core cannot run here: "not built", or how it departs from its source; None
    where it is built from the source as it is now."""
    compiled = [name for name in CORE if _compiled(name)]
    if not compiled:
        return "not built"
    built = _built()
    stale = [name for name in CORE if built.get(name) != digest(HERE / f"{name}.py")]
    if stale:
        return f"the compiled core was built from other sources than {', '.join(f'sim/{n}.py' for n in stale)}"
    missing = [name for name in (*CORE, SHARED) if not _compiled(name)]
    return f"the compiled core lacks {', '.join(missing)}" if missing else None


def choose() -> str:
    """Make the core load compiled or as Python (see the module), once, before any core module is
    imported; returns what it chose."""
    global state
    why = problem()
    if why == "not built":
        state = f"python ({why})"
        return state
    if PURE_OPTION in sys._xoptions:
        state = f"python (-X {PURE_OPTION})"
    elif why is not None:
        state = f"python ({why})"
        warnings.warn(f"mkernel: {state}; running it as Python (slower). Reinstall mkernel to compile it again "
                      "(pip install -e . in a checkout)", RuntimeWarning, stacklevel=3)
    else:
        state = "compiled (mypyc)"
        return state
    if not any(isinstance(f, _Source) for f in sys.meta_path):
        sys.meta_path.insert(0, _Source())
    return state
