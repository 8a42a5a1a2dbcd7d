"""The simulator's event core (``sim/native.py``'s CORE) compiled to C by mypyc, from the same source.

A run spends most of its time there; compiled, it gives the same results in about a fifth fewer
instructions. Where mypyc or a C compiler is missing, or the compile fails, the package installs as
Python alone, and runs the same, slower (``mkernel run`` says which core ran). The project's metadata
is pyproject.toml's; mypy's settings for this compile are its ``[tool.mypy]``.
"""
import ast
import hashlib
import shutil
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = Path(__file__).parent
SIM = ROOT / "sim"
STAGE = ROOT / "build" / "mypyc-src" / "mkernel"  # the core as the modules mkernel.sim.* (its folder is sim/)
GROUP = "mkernel.sim.core"  # the compiled core's shared part: mkernel/sim/core__mypyc
# the commands that compile: pip runs this file for the metadata too (egg_info, dist_info), where the
# extensions are not built, and mypyc's check and C would be made for nothing (two of three runs an install)
BUILDS = {"build", "build_ext", "bdist_wheel", "editable_wheel", "develop", "install"}


def core() -> tuple[str, ...]:
    """sim/native.py's CORE, read without importing the package (nothing is installed yet)."""
    tree = ast.parse((SIM / "native.py").read_text())
    (value,) = [node.value for node in tree.body if isinstance(node, ast.Assign) and node.targets[0].id == "CORE"]
    return ast.literal_eval(value)


def extensions(names: tuple[str, ...], stage: Path = STAGE, target: str = "build") -> list:
    """mypyc's extensions of the core (the core copied to ``stage`` as the modules mkernel.sim.*, its
    C written under ``target``), or none where it cannot (tests/sim/test_native.py runs this check)."""
    try:
        from mypyc.build import mypycify
    except ImportError:
        print("mkernel: mypyc is not installed: the simulator core stays Python", file=sys.stderr)
        return []
    shutil.rmtree(stage.parent, ignore_errors=True)
    (stage / "sim").mkdir(parents=True)
    (stage / "__init__.py").write_text("")
    for name in ("__init__", *names):
        shutil.copy(SIM / f"{name}.py", stage / "sim" / f"{name}.py")
    try:
        paths = [str(stage / "sim" / f"{name}.py") for name in names]
        return mypycify(["--config-file", str(ROOT / "pyproject.toml"), *paths], opt_level="3", group_name=GROUP,
                        target_dir=target)
    except (Exception, SystemExit):  # (mypy reports type errors by exiting)
        print("mkernel: mypy reported errors in the simulator core (above): it stays Python", file=sys.stderr)
        return []


def clear(folder: Path) -> None:
    """What an earlier build compiled into ``folder`` (a copy of sim/): this build's answer replaces it."""
    for path in [*folder.glob("*.so"), *folder.glob("*.pyd"), folder / "_built.py"]:
        path.unlink(missing_ok=True)


class BuildCore(build_ext):
    """build_ext that records the compiled sources' digests (sim/native.py reads them) where the
    compiled modules land, and leaves the core Python where the C compile fails."""

    def run(self) -> None:
        folders = {Path(self.get_ext_fullpath(ext.name)).parent for ext in self.extensions}
        for folder in folders:
            clear(folder)
        try:
            super().run()
        except Exception as e:
            print(f"mkernel: the simulator core did not compile ({e}): it stays Python", file=sys.stderr)
            for folder in folders:
                clear(folder)
            return
        digests = {name: hashlib.sha256((STAGE / "sim" / f"{name}.py").read_bytes()).hexdigest() for name in CORE}
        built = "".join(f"    {name!r}: {d!r},\n" for name, d in digests.items())
        for folder in folders:
            (folder / "_built.py").write_text(
                f'"""Written by setup.py: the sources the compiled core was built from."""\nSOURCES = {{\n{built}}}\n')


class BuildPy(build_py):
    """build_py without sim/_built.py: only BuildCore writes it, beside the modules it compiled."""

    def find_package_modules(self, package, package_dir):
        modules = super().find_package_modules(package, package_dir)
        return [m for m in modules if not (package == "mkernel.sim" and m[1] == "_built")]


CORE = core()
if __name__ == "__main__":  # (as setuptools runs it; test_native imports it for extensions())
    building = bool(BUILDS & set(sys.argv))
    EXTENSIONS = extensions(CORE) if building else []
    if building and not EXTENSIONS:  # (a wheel's staging folder may hold an earlier build's compiled core)
        for folder in ROOT.glob("build/lib*/mkernel/sim"):
            clear(folder)
    setup(ext_modules=EXTENSIONS, cmdclass={"build_ext": BuildCore, "build_py": BuildPy})
