"""Inputs of every file kind: splits tables, hardware profiles and the logs a sweep resumes from.
A file of the wrong kind or schema is one error naming the file and the key; a splits lookup that
finds no entry says so; a split sweep resumes where it stopped."""
from __future__ import annotations

import json

import pytest

from mkernel.studies import splits
from mkernel.cli import main
from mkernel.errors import InputError
from mkernel.scenario import load_scenario


def _one_line(capsys, *parts):
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for part in parts:
        assert part in err, err
    return err


@pytest.mark.parametrize("content,message", [
    ('{"rows": [], "world": 2}', "a splits.json of tools/hw_splits.py before"),
    ('[1, 2]', "a splits table is a JSON object of entries"),
    ('{}', "an empty object"),
    ('{"a/2x8/gemm_rs/1x1x1": {"best": 3}}', "key 'a/2x8/gemm_rs/1x1x1': no key 'best_intra_sms'"),
    ('{"a/2x8/gemm_rs/1x1x1": {"best_intra_sms": "8", "normalised": {}}}', "key 'best_intra_sms' is str"),
    ('not json', "not a readable splits table"),
])
def test_a_bad_splits_file_is_one_error_naming_file_and_key(tmp_path, capsys, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    assert main(["run", "--splits", str(path), "--kernel", "gemm_rs"]) == 2
    _one_line(capsys, str(path), message)


def _table(tmp_path, sc, best=8, name=None):
    k = splits.key(sc) if name is None else name + "/" + splits.key(sc).split("/", 1)[1]
    path = tmp_path / "splits.json"
    path.write_text(json.dumps({k: {"best_intra_sms": best, "cluster": splits.digest(sc),
                                    "normalised": {"4": 1.2, str(best): 1.0}}}))
    return path


def _gemm_rs(spec=None):
    import dataclasses

    from mkernel.problems import DEFAULT_SHAPES

    sc = load_scenario(spec)
    return dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel="gemm_rs",
                                                                **DEFAULT_SHAPES["gemm_rs"]))


def test_the_default_scenario_finds_the_entry_of_the_same_machine(tmp_path):
    """A sweep over paper-ib-2x8 serves `mkernel run --splits ... --kernel gemm_rs` on the default
    scenario: another name, the same cluster."""
    path = _table(tmp_path, _gemm_rs("paper-ib-2x8"), best=24)
    applied = splits.apply(_gemm_rs(), path)
    assert dict(applied.workload.sms)[splits.Role.INTRA] == 24


def test_no_matching_entry_is_a_clear_error(tmp_path):
    path = _table(tmp_path, _gemm_rs("paper-efa-2x8"))  # another machine: its digest differs
    with pytest.raises(InputError, match="no entry for default/2x8/gemm_rs/2048x2048x128"):
        splits.apply(_gemm_rs(), path)


def test_a_table_of_another_shape_is_not_applied(tmp_path):
    import dataclasses

    sc = _gemm_rs()
    path = _table(tmp_path, sc)
    bigger = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, m=4096))
    with pytest.raises(InputError, match="no entry for default/2x8/gemm_rs/4096x2048x128"):
        splits.apply(bigger, path)


def test_split_sweep_resumes_from_its_log(tmp_path, monkeypatch, capsys):
    """A split sweep stopped after some runs does only the rest when started again."""
    from mkernel import runner

    out = tmp_path / "s"
    argv = ["sweep", "--kernels", "gemm_rs", "--sizes", "1", "--scenarios", "paper-ib-2x8", "--comm-sms", "8,16",
            "--out", str(out)]
    real, calls = runner.run, []

    def counted(sc, **kw):
        calls.append(dict(sc.workload.sms))
        if len(calls) == 2:
            raise KeyboardInterrupt  # stopped in the second run
        return real(sc, **kw)

    monkeypatch.setattr(runner, "run", counted)
    with pytest.raises(KeyboardInterrupt):
        main(argv)
    assert len((out / "splits.jsonl").read_text().splitlines()) == 1
    calls.clear()
    monkeypatch.setattr(runner, "run", lambda sc, **kw: (calls.append(1), real(sc, **kw))[1])
    assert main(argv) == 0
    assert len(calls) == 1  # only the split not yet logged
    table = json.loads((out / "splits.json").read_text())
    assert set(next(iter(table.values()))["normalised"]) == {"8", "16"}


def test_a_sweep_log_of_another_kind_is_refused(tmp_path, capsys):
    out = tmp_path / "s"
    out.mkdir()
    (out / "results.jsonl").write_text('{"point": "x", "sms": 3}\n')
    assert main(["sweep", "--kernels", "gemm_rs", "--sizes", "1", "--out", str(out)]) == 2
    _one_line(capsys, f"{out / 'results.jsonl'}, line 1: no key 'key'")


def test_a_log_line_cut_short_is_redone_not_an_error(tmp_path):
    from mkernel.files import read_rows

    log = tmp_path / "results.jsonl"
    log.write_text('{"key": "a"}\n{"key": "b", "si')
    assert read_rows(log, {"key": (str,)}, "sweep") == [{"key": "a"}]
    assert log.read_text() == '{"key": "a"}\n'


def test_a_bad_hardware_profile_names_file_and_key(tmp_path, capsys):
    profile = tmp_path / "hw.toml"
    profile.write_text("[gpu]\nsms = 'many'\n")
    sc = tmp_path / "s.toml"
    sc.write_text(f"[cluster]\nhardware = '{profile}'\nnodes = 1\ngpus_per_node = 1\n"
                  "[workload]\nkernel = 'gemm_ar'\nm = 256\nn = 256\nk = 64\n")
    assert main(["run", str(sc)]) == 2
    _one_line(capsys, str(profile), "key 'gpu.sms' must be an integer")


def test_calibrate_refuses_to_merge_into_a_file_that_is_no_profile(tmp_path, capsys):
    """Checked before any GPU work, so this holds on a machine without one."""
    scenario = tmp_path / "not-a-profile.toml"
    scenario.write_text("[cluster]\nnodes = 1\n")
    assert main(["calibrate", "--out", str(scenario)]) == 2
    _one_line(capsys, str(scenario), "unknown key 'cluster'")


def test_an_entry_tuned_on_other_cluster_parameters_is_refused(tmp_path):
    """The table's own key, but tuned on another kernel profile: `mkernel run --splits` must not take a
    split tuned for other rates (the paper check's tuned run relies on the same refusal)."""
    import dataclasses

    sc = _gemm_rs()
    path = _table(tmp_path, sc, best=24)
    assert dict(splits.apply(sc, path).workload.sms)[splits.Role.INTRA] == 24  # same parameters: taken
    other = dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, kernels="reference"))
    assert splits.key(other) == splits.key(sc) and splits.digest(other) != splits.digest(sc)
    with pytest.raises(InputError, match="tuned on other cluster parameters"):
        splits.apply(other, path)
