"""The mkernel command: exit codes 0/1/2, schema-valid JSON, traces, and import hygiene."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mkernel.cli import main
from mkernel.result import check_result

SMALL = ["--nodes", "2", "--gpus-per-node", "2", "--m", "256", "--n", "512", "--k", "64"]


def test_run_writes_a_schema_valid_result(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["run", *SMALL, "--data", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert check_result(result) == []
    assert result["correct"] is True and result["baseline"]["correct"] is True
    assert result["speedup"] == pytest.approx(result["baseline"]["time_s"] / result["time_s"])
    assert result["cluster"] == {"nodes": 2, "gpus_per_node": 2, "transport": "ib_rc"}
    assert "speedup" in capsys.readouterr().out


def test_run_without_data_leaves_correct_unchecked(tmp_path):
    out = tmp_path / "r.json"
    assert main(["run", "paper-efa-2x8", "--m", "512", "--n", "512", "--k", "32", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert check_result(result) == [] and result["correct"] is None and result["error"] is None
    assert result["cluster"]["transport"] == "efa_srd"


def test_failed_check_exits_1(monkeypatch, capsys):
    from mkernel import sampled_oracle

    real = sampled_oracle.expected
    monkeypatch.setattr(sampled_oracle, "expected",
                        lambda *a: {k: [o + 1.0 for o in v] for k, v in real(*a).items()})
    assert main(["run", *SMALL, "--data"]) == 1


@pytest.mark.parametrize("argv,message", [
    (["run", "/nonexistent.toml"], "neither a file nor a bundled scenario"),
    (["run", "--nodes", "0"], "--nodes must be >= 1"),
    (["run", "--m", "3"], "command line: workload cannot run on this cluster"),
    (["run", "--kernel", "moe_dispatch_gemm", "--tokens", "1001"], "multiples of 16; got m=1001"),
    (["run", "--tokens", "1024"], "--tokens applies to --kernel moe_dispatch_gemm"),
    (["run", "--kernel", "ring_attention", "--n", "8192"], "would declare 6,684,672 tasks"),
    (["run", *SMALL, "--backend", "hw"], "hw backend"),
])
def test_bad_input_exits_2_with_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_argparse_errors_exit_2():
    with pytest.raises(SystemExit) as exc:
        main(["run", "--transport", "tcp"])
    assert exc.value.code == 2


def test_bad_scenario_file_exits_2(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text("[cluster]\nnodes = -1\ngpus_per_node = 1\n[workload]\nkernel = 'gemm_ar'\nm = 1\nn = 1\nk = 1\n")
    assert main(["run", str(path)]) == 2
    assert f"{path}: key 'cluster.nodes' must be an integer >= 1, got -1" in capsys.readouterr().err


def test_trace_names_every_track(tmp_path):
    """`mkernel run paper-efa-2x8 --trace t.json`: role, proxy, NVLink and NIC tracks, all named."""
    trace = tmp_path / "t.json"
    assert main(["run", "paper-efa-2x8", "--m", "512", "--n", "1024", "--k", "64", "--trace", str(trace)]) == 0
    events = json.loads(trace.read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    named = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert spans and {(e["pid"], e["tid"]) for e in spans} <= set(named)
    assert {e["pid"] for e in spans} == {e["pid"] for e in events if e["name"] == "process_name"} == set(range(16))
    tracks = {name.split(" ")[0] for name in named.values()}
    assert {"compute", "intra", "send", "recv", "proxy"} <= tracks
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert {"nvlink.out GB/s", "nvlink.in GB/s", "nic0.out GB/s", "nic1.in GB/s"} <= counters


def test_show_prints_the_schedule(capsys):
    assert main(["show", "paper-ib-2x8", "--m", "1024", "--n", "1024", "--k", "64"]) == 0
    out = capsys.readouterr().out
    assert "gemm_ar / fused" in out and "gemm+nccl_hier_ar" in out and "network bytes" in out
    assert "a run executes the " in out


@pytest.mark.parametrize("kernel", ["gemm_rs", "gemm_ar"])
def test_show_says_how_the_node_reduces_and_the_flag_is_the_gemm_ops_alone(capsys, kernel):
    """``--node-reduce`` (Workload.node_reduce): show prints the choice and the push schedule's accumulating
    copies; on an op without a node reduction the flag is one clear error before any work."""
    small = ["--kernel", kernel, "--nodes", "1", "--m", "1024", "--n", "1024", "--k", "64"]
    assert main(["show", "paper-ib-2x8", *small, "--node-reduce", "push"]) == 0
    out = capsys.readouterr().out
    assert "the node owner's reduction: push (node_reduce)" in out and "copy" in out
    assert main(["show", "paper-ib-2x8", *small]) == 0
    assert "the node owner's reduction: pull (node_reduce)" in capsys.readouterr().out
    assert main(["run", "--kernel", "ag_gemm", "--node-reduce", "push"]) == 2
    assert "--node-reduce applies to --kernel gemm_rs or gemm_ar" in capsys.readouterr().err


def test_import_needs_no_simpy_torch_or_gpu():
    code = ("import sys, mkernel; mkernel.load_scenario('default'); "
            "bad = [m for m in ('simpy', 'torch', 'triton', 'pyverbs', 'rich') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


NUMPY_WATCH = ("import os, sys\n"
               "class Watch:\n"
               "    def find_spec(self, name, path=None, target=None):\n"
               "        if name == 'numpy':\n"
               "            print('numpy loads with', os.environ.get('OPENBLAS_THREAD_TIMEOUT'),\n"
               "                  os.environ.get('NUMPY_MADVISE_HUGEPAGE'))\n"
               "sys.meta_path.insert(0, Watch())\n")


@pytest.mark.parametrize("preset", [None, "10"])
def test_the_command_sets_numpy_s_process_knobs_before_numpy_loads(preset):
    """Importing mkernel loads no numpy, so the command sets OpenBLAS's idle timeout (an idle worker
    spins about 0.1 s of a core otherwise) and turns off numpy's huge-page requests (compaction stalls:
    mkernel.cli) before numpy loads; a value the user set stays. numpy itself reports the page setting."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_THREAD_TIMEOUT", "NUMPY_MADVISE_HUGEPAGE")}
    if preset:
        env["OPENBLAS_THREAD_TIMEOUT"] = preset
        env["NUMPY_MADVISE_HUGEPAGE"] = "1"
    code = (NUMPY_WATCH + "import mkernel\nprint('after import mkernel:', 'numpy' in sys.modules)\n"
            "import mkernel.cli\nimport numpy\n"  # (numpy loads here at the latest)
            "from numpy._core.multiarray import _get_madvise_hugepage\nprint('huge pages:', _get_madvise_hugepage())\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[:3] == ["after import mkernel: False",
                                            f"numpy loads with {preset or '4'} {'1' if preset else '0'}",
                                            f"huge pages: {bool(preset)}"], proc.stdout


def test_the_names_that_load_numpy_are_the_package_s_own_whatever_loaded_first():
    """run, validate and ScheduleBuilder load on first use; mkernel.validate stays the function even where
    its module (mkernel.validation) was imported first."""
    code = ("import mkernel.validation, mkernel, mkernel.runner, mkernel.schedule_builder\n"
            "assert mkernel.validate is mkernel.validation.validate and mkernel.run is mkernel.runner.run\n"
            "from mkernel import *\n"
            "assert ScheduleBuilder is mkernel.schedule_builder.ScheduleBuilder and validate is mkernel.validate\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("terminal", [True, False])
def test_a_run_shows_its_progress_bar_only_past_its_first_seconds_on_a_terminal(terminal):
    """mkernel.report.progress_bar (the bar of a run that lasts more than a few seconds): a run shorter than
    ``after_s`` loads nothing for it (rich's progress module loads when the bar is first shown); a longer one
    shows it where the output is a terminal (rich's TTY_COMPATIBLE=1 stands for one here), and loads nothing
    where it is not (piped: rich would draw nothing)."""
    code = ("import sys\nfrom mkernel.report import progress_bar\n"
            "with progress_bar(after_s=60) as p:\n    p('build', 1, 4)\n"
            "print('short run:', 'rich.progress' in sys.modules)\n"
            "with progress_bar(after_s=0.0) as p:\n    p('build', 1, 4)\n    p('fused', 2, 4)\n"
            "print('long run:', 'rich.progress' in sys.modules)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_TERMINAL", "TTY_COMPATIBLE", "TTY_INTERACTIVE")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**env, "TTY_COMPATIBLE": "1"} if terminal else env)
    assert proc.returncode == 0, proc.stderr
    said = [("short" if "short run:" in line else "long", line.endswith("True")) for line in proc.stdout.splitlines()
            if line.endswith(("run: False", "run: True"))]  # (a line may start with the bar's control codes)
    assert said == [("short", False), ("long", terminal)], proc.stdout


def test_python_dash_m_entry_point(tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "mkernel", "run", *SMALL, "--json", str(out)], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    assert "simulated events" in proc.stdout and not check_result(json.loads(out.read_text()))  # (all flushed)
    proc = subprocess.run([sys.executable, "-m", "mkernel", "run", "nosuch.toml"], capture_output=True, text=True)
    assert proc.returncode == 2 and "nosuch.toml" in proc.stderr


# the process's exit (mkernel.cli.entry) after a command that registers an exit callback or leaves a thread
# running, in a process a profiler watches, or none of these
_EXIT = """import atexit, sys, threading, time
from mkernel import cli
atexit.register(print, "callback from before the command")
if {profiled}:
    sys.setprofile(lambda *args: None)
def command(args):
    if {registers}:
        atexit.register(print, "callback the command registered")
    if {thread}:
        threading.Thread(target=lambda: (time.sleep(0.5), print("the thread's last words"))).start()
    print("output")
    return 3
cli.cases.run = command
sys.argv = ["mkernel", "run"]
cli.entry()
"""


@pytest.mark.parametrize("registers, thread, profiled", [(False, False, False), (True, False, False),
                                                         (False, True, False), (False, False, True)])
def test_the_process_ends_at_once_unless_the_command_left_a_callback_or_a_thread(registers, thread, profiled):
    """A command that registered nothing to run at exit and left no thread running ends the process
    at once (the interpreter's freeing skipped: the callback from before it does not run); one that
    did, or one a profiler watches, exits as usual: its thread finishes, every callback runs. Either
    way its output and exit code come through."""
    code = _EXIT.format(registers=registers, thread=thread, profiled=profiled)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "output"
    after = (["callback the command registered"] if registers else []) + ["callback from before the command"]
    assert lines[1:] == (["the thread's last words"] + after if thread else after if registers or profiled else [])


def test_a_profiled_command_reports():
    """``python -m cProfile -m mkernel``: the profiler's table comes after the command returns."""
    proc = subprocess.run([sys.executable, "-m", "cProfile", "-s", "tottime", "-m", "mkernel", "run", *SMALL],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "function calls" in proc.stdout and "Ordered by: internal time" in proc.stdout


def test_issue_acceptance_run_on_the_paper_testbed(tmp_path):
    """`mkernel run scenarios/paper-ib-2x8.toml --m 4096 --n 4096 --k 256 --data` reports correct: true."""
    out = tmp_path / "r.json"
    scenario = str(__import__("pathlib").Path(__file__).resolve().parents[2] / "scenarios" / "paper-ib-2x8.toml")
    assert main(["run", scenario, "--m", "4096", "--n", "4096", "--k", "256", "--data", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["correct"] is True and result["error"] < 1e-5 and result["speedup"] > 0


def test_selftest_without_a_gpu_says_what_is_missing(capsys):
    from mkernel.hw import unavailable

    reason = unavailable()
    if reason is None:
        pytest.skip("this machine can run the hw backend")
    assert main(["selftest"]) == 2
    assert capsys.readouterr().err.strip() == f"mkernel: {reason}"


def test_selftest_rejects_impossible_cluster(capsys):
    assert main(["selftest", "--nodes", "0"]) == 2
    assert "--nodes 0 and --gpus-per-node 2 must be >= 1" in capsys.readouterr().err
