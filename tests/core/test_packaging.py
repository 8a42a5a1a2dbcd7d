"""The wheel ships mkernel, mkernel.sim, mkernel.hw and the bundled scenarios, and nothing generic."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _source_of(name: str) -> Path:
    """The file of this tree a wheel entry comes from (pyproject's package-dir: mkernel/sim/x is sim/x,
    mkernel/hw/x is hw/x, mkernel/scenarios/x is scenarios/x)."""
    parts = name.split("/")
    return ROOT.joinpath(*(parts[1:] if len(parts) > 2 and parts[1] in ("sim", "hw", "scenarios") else parts))


def test_wheel_installs_the_folder_mapped_packages(tmp_path):
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    wheel = next(tmp_path.glob("mkernel-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.startswith("mkernel-")}
    assert tops == {"mkernel"}, tops  # no generic top-level sim/ or hw/ in site-packages
    assert {"mkernel/sim/engine.py", "mkernel/hw/__init__.py", "mkernel/scenarios/default.toml"} <= set(names)
    # every module shipped is a source of this tree (setuptools keeps stale copies in build/lib: a module moved or
    # renamed here would ship under its old name too)
    stale = [n for n in names if n.endswith(".py") and not _source_of(n).is_file()]
    assert not stale, stale
    # the native proxy is built from source on the user's machine
    from mkernel.hw.runtime import native

    shipped = {f"mkernel/hw/runtime/csrc/{n}" for n in native.SOURCES + native.HEADERS}
    assert shipped <= set(names), sorted(shipped - set(names))
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = ("import mkernel, mkernel.sim, mkernel.hw; from mkernel.scenario import load_scenario; "
            "assert mkernel.__file__.startswith(%r), mkernel.__file__; "
            "assert mkernel.sim.__file__.startswith(%r); print(load_scenario().name)") % (str(site), str(site))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0 and proc.stdout.strip() == "default", proc.stdout + proc.stderr
