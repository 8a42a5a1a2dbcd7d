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

ROOT = Path(__file__).parent
SIM = ROOT / "sim"
STAGE = ROOT / "build" / "mypyc-src" / "mkernel"  # the core as the modules mkernel.sim.* (its folder is sim/)


def core() -> tuple[str, ...]:
    """sim/native.py's CORE, read without importing the package (nothing is installed yet)."""
    tree = ast.parse((SIM / "native.py").read_text())
    (value,) = [node.value for node in tree.body if isinstance(node, ast.Assign) and node.targets[0].id == "CORE"]
    return ast.literal_eval(value)


def extensions(names: tuple[str, ...]) -> list:
    try:
        from mypyc.build import mypycify
    except ImportError:
        print("mkernel: mypyc is not installed: the simulator core stays Python", file=sys.stderr)
        return []
    shutil.rmtree(STAGE.parent, ignore_errors=True)
    (STAGE / "sim").mkdir(parents=True)
    (STAGE / "__init__.py").write_text("")
    for name in ("__init__", *names):
        shutil.copy(SIM / f"{name}.py", STAGE / "sim" / f"{name}.py")
    try:
        return mypycify([str(STAGE / "sim" / f"{name}.py") for name in names], opt_level="3",
                        group_name="mkernel.sim.core")  # (its shared part: mkernel/sim/core__mypyc)
    except (Exception, SystemExit) as e:  # (mypy reports type errors by exiting)
        print(f"mkernel: mypyc could not compile the simulator core ({e}): it stays Python", file=sys.stderr)
        return []


class BuildCore(build_ext):
    """build_ext that records the compiled sources' digests (sim/native.py reads them), and leaves
    the core Python where the C compile fails."""

    def run(self) -> None:
        if not self.extensions:
            return
        try:
            super().run()
        except Exception as e:
            print(f"mkernel: the simulator core did not compile ({e}): it stays Python", file=sys.stderr)
            return
        digests = {name: hashlib.sha256((STAGE / "sim" / f"{name}.py").read_bytes()).hexdigest() for name in CORE}
        built = "".join(f"    {name!r}: {d!r},\n" for name, d in digests.items())
        text = f'"""Written by setup.py: the sources the compiled core was built from."""\nSOURCES = {{\n{built}}}\n'
        for folder in {SIM, Path(self.build_lib) / "mkernel" / "sim"}:
            if folder.is_dir():
                (folder / "_built.py").write_text(text)


CORE = core()
setup(ext_modules=extensions(CORE), cmdclass={"build_ext": BuildCore})
