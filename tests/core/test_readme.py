"""The docs stay true: every command of README (and docs/usage.md) runs and exits as documented
(the CPU ones, on small settings where the command as written takes minutes; the GPU ones are
skipped), the README's data-mode snippet runs as written in well under 1 GB, the result-schema
example matches what the code prints, and no doc links outside the repository or names an issue."""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [p for p in (ROOT / "README.md", ROOT / "docs" / "usage.md") if p.exists()]
GPU_COMMANDS = {"selftest": "runs on a GPU", "calibrate": "measures a GPU", "bench": "times ops on GPUs",
                "doctor": "reads RDMA devices", "validate": "reads the files of GPU runs (calibrate, bench)",
                "accuracy": "reads the files of GPU runs (calibrate, bench)"}
SMALL = {"run": ["--m", "1024", "--n", "1024", "--k", "128"], "show": ["--m", "1024", "--n", "1024", "--k", "128"]}
SMALL_KERNEL = {"ring_attention": ["--seq", "256", "--n", "4"]}
AS_WRITTEN = ("--splits splits/splits.json",)  # quick already, and on the split sweep's own table
SHRUNK_SWEEP = ["--sizes", "1", "--kernels", "gemm_rs"]  # the reference grid: one op, its first size


# a command line starts with a program (or an environment assignment before one); a plain block's
# other lines (README's picture) are not commands
PROGRAM = re.compile(r"(?:[A-Z_]+=\S+ )*(?:mkernel|python3?|torchrun|tools/)\b")


def blocks(doc: Path) -> list[tuple[str, list[str]]]:
    """(language, lines) of every fenced code block of ``doc``."""
    out, current = [], None
    for line in doc.read_text().splitlines():
        if line.startswith("```"):
            if current is None:
                current = (line[3:].strip(), [])
            else:
                out.append(current)
                current = None
        elif current is not None:
            current[1].append(line)
    return out


def commands() -> list[tuple[str, str]]:
    """(command line, its trailing comment) of every plain code block of the docs, in order."""
    out = []
    for doc in DOCS:
        for lang, lines in blocks(doc):
            for line in lines if not lang else ():
                cmd, _, comment = line.partition("  #")
                if PROGRAM.match(cmd.strip()) and "pip install" not in cmd:
                    out.append((cmd.strip(), comment.strip()))
    return out


def plan(cmd: str, comment: str) -> tuple[list[str] | None, int, str]:
    """What the test runs for a documented command (None: skipped), the exit it expects, and why."""
    argv = shlex.split(cmd)
    expected = int(m.group(1)) if (m := re.search(r"exit (\d)", comment)) else 0
    if argv[0] == "python" and argv[1].startswith("tools/studies/"):  # CPU studies, run by the test's python
        small = ["--sizes", "1"] if "paper_check" in argv[1] else []
        return [sys.executable, str(ROOT / argv[1]), *argv[2:], *small], expected, "a study on its first size" if small else "as written"
    if argv[0] != "mkernel":
        return None, expected, "a GPU tool (torchrun, tools/device/*.sh)"
    sub = argv[1]
    if sub in GPU_COMMANDS:
        return None, expected, GPU_COMMANDS[sub]
    if "--backend" in argv and argv[argv.index("--backend") + 1] == "hw":
        return None, expected, "runs on the GPUs"
    if sub == "sweep" and "--grid" in argv:  # documented as about 30 min: it must start, and stop at its deadline
        return argv[1:] + ["--timeout", "3"], 1, "the scale-out study, stopped at a 3 s deadline"
    if sub == "sweep" and "--comm-sms" not in argv and "--sizes" not in argv:
        return argv[1:] + SHRUNK_SWEEP, expected, "the reference grid, one op at its first size"
    if sub in SMALL and not any(a in cmd for a in AS_WRITTEN):
        kernel = argv[argv.index("--kernel") + 1] if "--kernel" in argv else None
        return argv[1:] + SMALL_KERNEL.get(kernel, SMALL[sub]), expected, "a smaller shape"
    return argv[1:], expected, "as written"


CASES = commands()


def test_the_docs_have_commands():
    assert len(CASES) > 20 and any(c.startswith("mkernel sweep") for c, _ in CASES)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """One folder for every command, in order (the split sweep writes what `run --splits` reads)."""
    d = tmp_path_factory.mktemp("readme")
    (d / "scenarios").symlink_to(ROOT / "scenarios")
    return d


@pytest.mark.parametrize("cmd,comment", CASES, ids=[c[:70] for c, _ in CASES])
def test_every_documented_command_exits_as_documented(cmd, comment, workdir, monkeypatch, capsys):
    from mkernel.cli import main

    argv, expected, why = plan(cmd, comment)
    if argv is None:
        pytest.skip(f"{why}: GPU runs are tested under the gpu mark")
    monkeypatch.chdir(workdir)
    if argv[0] == sys.executable:
        proc = subprocess.run(argv, cwd=workdir, capture_output=True, text=True, timeout=600,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert proc.returncode == expected, (why, proc.stderr[-2000:])
        return
    assert main(argv) == expected, (why, capsys.readouterr().err[-2000:])


def test_the_readme_data_snippet_runs_as_written_in_well_under_a_gigabyte():
    """`mkernel.run(mkernel.load_scenario("paper-ib-2x8"), data=True)`: the default shape, every
    rank's data, on sampled rows and columns."""
    snippet = next("\n".join(lines) + "\n" for doc in DOCS for lang, lines in blocks(doc)
                   if lang == "python" and any("data=True" in line for line in lines))
    code = ("import resource, json\n" + snippet +
            "print(json.dumps({'correct': result['correct'], 'rss_kb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["correct"] is True and got["rss_kb"] < 1_000_000, got


def test_the_result_schema_example_is_what_the_default_run_prints():
    """docs/result-schema.md's example against a fresh run (wall time and event counts aside: the
    machine and the engine's bookkeeping change them); `python tools/studies/result_example.py` rewrites it."""
    import mkernel
    from mkernel.result import TOP_LEVEL, abridged

    text = (ROOT / "docs" / "result-schema.md").read_text()
    shown = json.loads(re.search(r"```json\n(.*?)\n```", text, re.S).group(1))
    fresh = abridged(mkernel.run(mkernel.load_scenario())[0])
    for key in ("wall_s", "events"):
        shown.pop(key), fresh.pop(key)
    assert _close(shown, fresh), "run `python tools/studies/result_example.py` to regenerate the example"
    for key in TOP_LEVEL:
        assert f"| `{key}` |" in text, f"docs/result-schema.md does not describe {key!r}"


def _close(a, b, rel: float = 0.01) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], rel) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, rel) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)
    return a == b


def _user_docs() -> list[Path]:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]  # docs/results/ are dated records
    code = [p for folder in ("mkernel", "sim", "hw") for p in sorted((ROOT / folder).rglob("*.py"))]
    return docs + code


def test_no_doc_links_outside_the_repository():
    found = []
    for path in _user_docs():
        for no, line in enumerate(path.read_text().splitlines(), 1):
            if "../shared" in line:
                found.append(f"{path.relative_to(ROOT)}:{no}: {line.strip()}")
    assert not found, "\n".join(found)


def test_no_doc_or_user_read_comment_names_an_issue():
    # ours, not a verb ("one GPU can issue 63 puts") nor a cited NCCL issue ("nccl-tests issue 212", "[issue 267](...)")
    pattern = re.compile(r"\b(?<!can )(?<!nccl-tests )(?<!nccl )(?<!NVIDIA/nccl )(?<!\[)[Ii]ssues? #?\d+")
    found = [f"{p.relative_to(ROOT)}:{no}: {line.strip()}" for p in _user_docs()
             for no, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, "\n".join(found)


def test_every_call_the_docs_show_resolves_after_a_plain_import_mkernel():
    """`mkernel.X.Y(...)` in README and docs/*.md names something a user can call after `import mkernel`
    (the torch ops, their fallbacks and `mkernel.hw.api.*` load torch on first use). A path through a
    subpackage gets a fresh process of its own: a torch op used first would import it as a side effect."""
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    names = sorted({m.group(1) for p in docs for m in re.finditer(r"\b(mkernel(?:\.[A-Za-z_]\w*)+)\(", p.read_text())})
    assert names, "the docs show no mkernel call"
    pytest.importorskip("torch")
    groups = [[n for n in names if n.count(".") == 1]] + [[n] for n in names if n.count(".") > 1]
    bad = []
    for group in groups:
        code = ("import functools, mkernel\n"
                f"for name in {group!r}:\n"
                "    functools.reduce(getattr, name.split('.')[1:], mkernel)\n")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        if proc.returncode:
            bad.append(f"{group}: {proc.stderr.strip().splitlines()[-1]}")
    assert not bad, "\n".join(bad)


def test_the_hw_package_path_resolves_after_a_plain_import_mkernel():
    """`import mkernel; mkernel.hw.api.fallback_gemm_ar` (the spelling older docs and user code have)."""
    pytest.importorskip("torch")
    code = "import mkernel; print(callable(mkernel.hw.api.fallback_gemm_ar), callable(mkernel.hw.api.check))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.split() == ["True", "True"], proc.stderr[-2000:]


def test_every_repository_path_the_docs_name_exists():
    """A path in backticks in README or docs/*.md (`tools/...`, `tests/...`, `docs/results/...`) is a file
    or folder of the repository: moves leave no stale pointer behind."""
    pattern = re.compile(r"`((?:docs/|tools/|tests/|hw/|sim/|mkernel/|scenarios/)[\w./-]+?)(?:::[\w\[\]-]+)?`")
    missing = [f"{p.relative_to(ROOT)}: {m.group(1)}" for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
               for m in pattern.finditer(p.read_text())
               if "*" not in m.group(1) and "<" not in m.group(1) and not (ROOT / m.group(1)).exists()]
    assert not missing, "\n".join(missing)
