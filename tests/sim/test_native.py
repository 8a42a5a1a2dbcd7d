"""The simulator core compiled (mypyc, where the install built it) and as Python: the same results to the
bit, the Python source wherever the compiled one is stale or Python is asked for, and the tests that
patch the core's classes run on its Python source (sim/native.py)."""
from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from mkernel.sim import native

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = native.problem()  # (None: built from the source as it is; this process may still ask for Python)
COMPILED = PROBLEM is None
NOT_BUILT = "the simulator core is not compiled here (setup.py builds it where mypyc and a C compiler are)"


@pytest.fixture
def compiled_core():
    """Skip where the core was not built; fail where it was, but from other sources or in part (the
    comparison would run Python against Python)."""
    if PROBLEM == "not built":
        pytest.skip(NOT_BUILT)
    assert PROBLEM is None, PROBLEM

# Everything a run reports that either core computes (all but the wall time and the core's name), for
# each op, both with every node simulated (hazards tracked) and collapsed, and under data, stress and
# faults: printed as JSON by a process on each core.
PROBE = r"""
import dataclasses, json, sys
sys.path.insert(0, "tests")
from harness.cases import small_workload
from mkernel import Cluster, load_scenario, runner
from mkernel.builders import get
from mkernel.sim import SimBackend
from mkernel.sim.faults import parse
out = []
sc = load_scenario("scenarios/paper-ib-2x8.toml")
for kernel in ("gemm_ar", "gemm_rs", "ag_gemm", "ring_attention", "moe_dispatch_gemm"):
    s = dataclasses.replace(sc, workload=small_workload(kernel), cluster=Cluster("2x4", nodes=2, gpus_per_node=4))
    for collapse in (False, True):
        r, _ = runner.run(s, collapse=collapse)
        out.append({k: v for k, v in r.items() if k not in ("wall_s", "sim_core")})
s = dataclasses.replace(sc, workload=small_workload("gemm_ar"), cluster=Cluster("2x2", nodes=2, gpus_per_node=2))
out.append({k: v for k, v in runner.run(s, data=True)[0].items() if k not in ("wall_s", "sim_core")})
fused = get("gemm_ar").build(small_workload("gemm_ar"), s.cluster, grouped=True)
for kw in ({"stress": 0.3, "seed": 4}, {"faults": parse("drop=0.05,delay_us=2,seed=3")}, {"trace": True}):
    st = SimBackend().run(fused, s.cluster, **kw)
    out.append([st.time_s, st.per_rank_s, st.events, st.bytes_total, list(st.hazards), st.spans,
                {k: v for k, v in st.metrics.items() if k != "sim_core"}])
for line in out:  # (one run a line, as the interpreter writes each value: an int is not a float here)
    print(json.dumps(line, default=repr))
"""


def _python(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_the_compiled_and_the_python_core_give_the_same_results(compiled_core):
    compiled, python = _python("-c", PROBE), _python("-X", native.PURE_OPTION, "-c", PROBE)
    assert compiled.returncode == 0, compiled.stderr[-3000:]
    assert python.returncode == 0, python.stderr[-3000:]
    a, b = compiled.stdout.splitlines(), python.stdout.splitlines()
    assert len(a) == len(b) == 14
    for i, (x, y) in enumerate(zip(a, b)):  # (the text: 1 and 1.0 differ, as they would in a result file)
        assert x == y, f"run {i} differs between the compiled and the Python core"


def test_the_tests_that_patch_the_core_pass_on_its_python_source(compiled_core):
    """Where the core is compiled, the tests marked ``python_core`` skip in this process (conftest.py):
    they run here, in a process that asks for the Python core."""
    done = _python("-X", native.PURE_OPTION, "-m", "pytest", "-q", "-m", "python_core", "-p", "no:cacheprovider",
                   "tests", timeout=900)
    assert done.returncode == 0, done.stdout[-5000:]
    assert " passed" in done.stdout and " skipped" not in done.stdout and " failed" not in done.stdout, done.stdout[-2000:]


def test_asking_for_python_loads_the_core_from_its_source():
    code = "import mkernel.sim.engine as e, mkernel.sim.native as n; print(e.__file__); print(n.state)"
    done = _python("-X", native.PURE_OPTION, "-c", code)
    path, state = done.stdout.split("\n")[:2]
    assert done.returncode == 0 and path.endswith("engine.py") and state.startswith("python"), done.stdout + done.stderr
    done = _python("-c", code)
    path, state = done.stdout.split("\n")[:2]
    assert path.endswith("engine.py") != COMPILED and state.startswith("compiled") == COMPILED, done.stdout


def test_the_core_still_compiles(tmp_path):
    """setup.py's compile runs mypy and mypyc's checks first and, on an error, installs the core as
    Python (a run still gives the same results, slower): a change they reject fails here instead.
    setup.py's own step, in a temporary folder: the C is written, not compiled."""
    pytest.importorskip("mypyc", reason="mypy is not installed (pip install 'mkernel[test]')")
    code = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location('mkernel_setup', 'setup.py')\n"
            "setup = importlib.util.module_from_spec(spec); spec.loader.exec_module(setup)\n"
            f"sys.exit(0 if setup.extensions(setup.CORE, setup.Path({str(tmp_path / 'src' / 'mkernel')!r}), "
            f"{str(tmp_path / 'c')!r}) else 1)")
    done = _python("-c", code)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-1000:]


@pytest.fixture
def built(tmp_path, monkeypatch):
    """A folder of core sources with a compiled file and a recorded digest beside each (fake ones: only
    their presence is read), as sim/native.py sees its own."""
    monkeypatch.setattr(native, "HERE", tmp_path)
    monkeypatch.setattr(native, "state", "python (not built)")
    monkeypatch.setattr(sys, "meta_path", [f for f in sys.meta_path if not isinstance(f, native._Source)])
    digests = {}
    for name in native.CORE:
        (tmp_path / f"{name}.py").write_text(f"NAME = {name!r}\n")
        (tmp_path / f"{name}{native.importlib.machinery.EXTENSION_SUFFIXES[0]}").write_bytes(b"")
        digests[name] = native.digest(tmp_path / f"{name}.py")
    (tmp_path / f"{native.SHARED}{native.importlib.machinery.EXTENSION_SUFFIXES[0]}").write_bytes(b"")
    (tmp_path / "_built.py").write_text(f"SOURCES = {digests!r}\n")
    return tmp_path


def _sourced() -> bool:
    return any(isinstance(f, native._Source) for f in sys.meta_path)


def test_a_compiled_core_matching_its_source_is_taken(built, monkeypatch):
    monkeypatch.delitem(sys._xoptions, native.PURE_OPTION, raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert native.choose() == "compiled (mypyc)"
    assert not _sourced()


def test_a_source_changed_since_the_build_runs_as_python_with_a_warning(built, monkeypatch):
    monkeypatch.delitem(sys._xoptions, native.PURE_OPTION, raising=False)
    (built / "flows.py").write_text("NAME = 'flows, edited'\n")
    with pytest.warns(RuntimeWarning, match="built from other sources than sim/flows.py"):
        assert native.choose().startswith("python (the compiled core was built from other sources than sim/flows.py")
    assert _sourced()
    spec = native._Source.find_spec(f"{native.PACKAGE}.engine")
    assert spec.origin == str(built / "engine.py")  # the source, not the compiled file beside it
    assert native._Source.find_spec("mkernel.ir") is None and native._Source.find_spec("mkernel.sim.backend") is None


def test_a_core_compiled_in_part_runs_as_python(built, monkeypatch):
    monkeypatch.delitem(sys._xoptions, native.PURE_OPTION, raising=False)
    for path in built.glob("maxmin.*"):
        if path.suffix != ".py":
            path.unlink()
    with pytest.warns(RuntimeWarning, match="lacks maxmin"):
        assert native.choose() == "python (the compiled core lacks maxmin)"
    assert _sourced()


def test_a_core_without_its_shared_part_runs_as_python(built, monkeypatch):
    monkeypatch.delitem(sys._xoptions, native.PURE_OPTION, raising=False)
    for path in built.glob(f"{native.SHARED}.*"):
        path.unlink()
    with pytest.warns(RuntimeWarning, match=f"lacks {native.SHARED}"):
        assert native.choose() == f"python (the compiled core lacks {native.SHARED})"


def test_python_asked_for_is_python(built, monkeypatch):
    monkeypatch.setitem(sys._xoptions, native.PURE_OPTION, True)
    assert native.choose() == f"python (-X {native.PURE_OPTION})" and _sourced()
