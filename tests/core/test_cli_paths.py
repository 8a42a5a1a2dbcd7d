"""Output paths are checked before any work: a bad --json, --trace or --out is one line, exit 2,
and nothing is simulated or measured first."""
from __future__ import annotations

import pytest

from mkernel import runner
from mkernel.cli import main


@pytest.fixture
def no_work(monkeypatch):
    """Any run or sweep point reached is a failure: the check must come first."""
    def refuse(*_a, **_k):
        raise AssertionError("work started before the output path was checked")

    monkeypatch.setattr(runner, "run", refuse)
    monkeypatch.setattr(runner, "build", refuse)


@pytest.mark.parametrize("argv,message", [
    (["run", "--json", "no-such-dir/r.json"], "--json no-such-dir/r.json: the folder no-such-dir does not exist"),
    (["run", "--trace", "."], "--trace .: is a folder"),
    (["run", "--json", "{tmp}/f.txt/r.json"], "is a file"),
    (["sweep", "--out", "{tmp}/f.txt"], "is a file, not a folder"),
    (["sweep", "--comm-sms", "4,8", "--out", "{tmp}/f.txt/x"], "is a file, so the folder cannot be created"),
    (["scaleout", "--out", "{tmp}/f.txt"], "is a file, not a folder"),
    (["calibrate", "--out", "no-such-dir/p.toml"], "the folder no-such-dir does not exist"),
    (["calibrate", "--raw", "{tmp}"], "is a folder"),
    (["bench", "--out", "{tmp}/f.txt"], "is a file, not a folder"),
    (["accuracy", "--calibration", "c.json", "--out", "no-such-dir/v.json"], "the folder no-such-dir does not exist"),
])
def test_bad_output_path_is_one_line_before_any_work(argv, message, tmp_path, no_work, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f.txt").write_text("x")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message.replace("{tmp}", str(tmp_path)) in err, err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_read_only_folder_is_refused(tmp_path, no_work, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        import os

        if os.access(locked, os.W_OK):  # root writes anywhere: nothing to check
            pytest.skip("running as root: every folder is writable")
        assert main(["run", "--json", str(locked / "r.json")]) == 2
        assert "is not writable" in capsys.readouterr().err
    finally:
        locked.chmod(0o700)


def test_a_new_out_folder_with_parents_is_allowed(tmp_path):
    from mkernel.files import output_folder

    assert output_folder(tmp_path / "a" / "b", "--out") == tmp_path / "a" / "b"
    assert not (tmp_path / "a").exists()  # checking creates nothing


def test_calibrate_never_writes_a_bundled_profile_by_default():
    from importlib import resources
    from pathlib import Path

    from mkernel.cli import _parser

    out = _parser().parse_args(["calibrate"]).out.resolve()
    bundled = Path(str(resources.files("mkernel.scenarios"))).resolve()
    assert not out.is_relative_to(bundled) and not out.is_relative_to(Path.cwd() / "scenarios")
