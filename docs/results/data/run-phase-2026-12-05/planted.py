"""Planted errors in this branch's run-phase code, each caught (or not) by the tests that guard it.

usage (from the checkout root): python planted.py            -> runs every error in its own process, prints a table
                                python planted.py N          -> plants error N (0: none) and runs the tests
                                python planted.py N times    -> plants error N, reruns the reference grid's 45 points
                                                                and diffs their times against main's (check/ref-main.json)
Each error is a textual change of one function's source, compiled in its module and set on its class
(or module); the tests then run in the same process (pytest -x: the first failing test names it). An error
the tests miss is then tried against main's simulated times of the reference grid (tools/studies/check_sim_times.py
in process, --tol 0: the check this branch passes with 0 points changed)."""
import inspect
import subprocess
import sys
import textwrap
import time

TESTS = ["tests/sim/test_signal_board.py", "tests/sim/test_waits_of.py", "tests/sim/test_flows.py",
         "tests/sim/test_groups.py", "tests/sim/test_array_path.py"]

ERRORS = [  # (what, module, owner (class name or None), function, old text, new text)
    ("board: a lone waiter released one count late", "signals", "SignalBoard", "bump_keys",
     "if waiting[0][0] <= value:", "if waiting[0][0] < value:"),
    ("board: a repeated list folded even where its keys have waiters", "signals", "SignalBoard", "bump_keys",
     "if cell is not None and cell[1] is not None:", "if False:"),
    ("board: released waiters kept on their key", "signals", "SignalBoard", "bump_keys",
     "cell[1] = still or None", "cell[1] = waiting"),
    ("board: waiters released by a bump of several counts not sorted by count", "signals", "SignalBoard",
     "bump_keys", "due.sort(key=_need)", "pass"),
    ("board: a wait for 0 on a key never bumped registered (never released)", "signals", "SignalBoard", "wait_key",
     "if need <= 0:", "if need < 0:"),
    ("_signal: bump lists joined whatever their times and repeats", "engine", None, "_more",
     "if times == 1 and repeat == 1 and bumps and bumps[-1][1] == 1 and bumps[-1][2] == 1:", "if bumps:"),
    ("_signal: a peer's flags bumped at once, not a latency later", "engine", "Model", "_signal",
     "_more(later, [k for k in keys if k[0] != rank], times, repeat)",
     "_more(now, [k for k in keys if k[0] != rank], times, repeat)"),
    ("_resume: a resumed run's later waits not checked", "dispatch", "Dispatch", "_resume",
     "if at < len(run.task.waits):", "if False:"),
    ("_join: a spanning run extended without its last part", "dispatch", "Dispatch", "_join",
     "parts[-1][2] += n", "pass"),
    ("_waits_of (one wait): a blocked member left in the next ready span", "dispatch", "Dispatch", "_waits_of",
     "                ready = i + 1\n        if ready", "                ready = i\n        if ready"),
    ("flows: equal group keys not one object (each plan its own group)", "flows", "FlowNet", "plan_legs",
     "self.keys.setdefault(key, key)", "key"),
]


def plant(n: int) -> None:
    what, module, owner, name, old, new = ERRORS[n - 1]
    mod = __import__(f"mkernel.sim.{module}", fromlist=[name])
    holder = getattr(mod, owner) if owner else mod
    src = textwrap.dedent(inspect.getsource(getattr(holder, name)))
    assert src.count(old) == 1, (what, old)
    space = dict(vars(mod))
    exec(compile(src.replace(old, new), f"<planted {n}>", "exec"), space)
    setattr(holder, name, space[name])


def main() -> None:
    if len(sys.argv) > 2:
        plant(int(sys.argv[1]))
        sys.path.insert(0, "tools/studies")
        import check_sim_times
        here = __file__.rsplit("/", 1)[0]
        check_sim_times.main(["committed", "docs/results/grid-2026-12-02-reference", "--tol", "0",
                              "--out", f"/tmp/planted-{sys.argv[1]}.json"])
        sys.exit(check_sim_times.main(["diff", f"{here}/check/ref-main.json", f"/tmp/planted-{sys.argv[1]}.json",
                                       "--tol", "0"]))
    if len(sys.argv) > 1:
        n = int(sys.argv[1])
        if n:
            plant(n)
        import pytest
        sys.exit(pytest.main(["-x", "-q", "-p", "no:cacheprovider", *TESTS]))
    print("| planted error | caught by (first failing test) | s |\n| --- | --- | --- |")
    for n in range(len(ERRORS) + 1):
        t = time.time()
        out = subprocess.run([sys.executable, __file__, str(n)], capture_output=True, text=True, timeout=1800).stdout
        failed = [line.split(" ")[1] for line in out.splitlines() if line.startswith("FAILED ")]
        caught = failed[0] if failed else "no test failed" if " passed" in out else out[-300:]
        if not failed:
            run = subprocess.run([sys.executable, __file__, str(n), "times"], capture_output=True, text=True,
                                 timeout=1800)
            counts = [line for line in run.stdout.splitlines() if " changed at all" in line]
            caught += f"; reference grid against main's times: {counts[-1] if counts else run.stdout[-200:]}"
        what = ERRORS[n - 1][0] if n else "nothing planted"
        print(f"| {n} {what} | {caught} | {time.time() - t:.0f} |", flush=True)


main()
