"""The import rules of docs/architecture.md, read from every module's imports (top-level and inside
functions, absolute and relative): a layer never imports one it must not, so the core runs without
the simulator or torch, the simulator without the GPU backend, and the GPU backend without the
simulator."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"mkernel": "mkernel", "mkernel.sim": "sim", "mkernel.hw": "hw"}
FRONT = {"mkernel", "mkernel.__main__", "mkernel.cli", "mkernel.cli_measure", "mkernel.cli_run", "mkernel.runner",
         "mkernel.backend"}
HW_ORDER = ("knobs", "lowering", "kernels", "runtime", "ops", "measure")  # each may import only those before it


def _modules() -> dict[str, Path]:
    out = {}
    for package, folder in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            out[".".join((package, *parts))] = path
    return out


def _imports(name: str, path: Path) -> set[str]:
    """Every module ``name`` imports, as absolute dotted names."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            mod = ".".join([*base, *([node.module] if node.module else [])])
            found.add(mod)
            found |= {f"{mod}.{a.name}" for a in node.names}
    return found


def _hw_layer(name: str) -> str | None:
    parts = name.split(".")
    if parts[:2] != ["mkernel", "hw"]:
        return None
    if len(parts) >= 3 and parts[2] in HW_ORDER:
        return parts[2]
    return "ops"  # the torch-op layer and the package itself


MODULES = _modules()


def _layer_of(name: str) -> str:
    if name.startswith("mkernel.sim"):
        return "sim"
    if name.startswith("mkernel.hw"):
        return "hw"
    if name in FRONT or name.startswith("mkernel.studies"):
        return "front"
    return "core"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_imports_only_what_its_layer_may(name):
    layer = _layer_of(name)
    imported = {m for m in _imports(name, MODULES[name]) if m in MODULES or m.split(".")[0] in ("torch", "simpy")}
    banned = {"core": ("mkernel.sim", "mkernel.hw", "torch", "simpy"), "sim": ("mkernel.hw", "torch"),
              "hw": ("mkernel.sim", "simpy"), "front": ()}[layer]
    bad = sorted(m for m in imported if any(m == b or m.startswith(b + ".") for b in banned)
                 and not m.startswith("mkernel.studies"))
    assert not bad, f"{name} ({layer}) imports {bad}"
    if layer == "hw" and name != "mkernel.hw":
        mine = HW_ORDER.index(_hw_layer(name))
        above = sorted(m for m in imported if _hw_layer(m) is not None and m != "mkernel.hw"
                       and HW_ORDER.index(_hw_layer(m)) > mine)
        assert not above, f"{name} ({_hw_layer(name)}) imports a layer above it: {above}"
