"""Where the CLI's process time goes on the every-node row, beside runner.run: imports, the scenario from the
command line, the run (with the CLI's progress bar), the result check, printing (to /dev/null), and what is left
after main returns (atexit). usage: python cli_parts.py > /dev/null (the figures go to stderr)"""
import atexit, io, os, resource, sys, time


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


start = cpu()
from mkernel import cli, cli_run, report, result, runner  # noqa: E402

parts, t = {"interpreter start": start, "imports": cpu() - start}, cpu()


def timed(mod, name, label):
    f = getattr(mod, name)

    def w(*a, **k):
        t0 = cpu()
        r = f(*a, **k)
        parts[label] = parts.get(label, 0.0) + cpu() - t0
        return r
    setattr(mod, name, w)


timed(runner, "run", "runner.run")
timed(cli_run, "scenario_from_args", "scenario from args")
timed(cli_run, "check_result", "check_result")
timed(report, "print_result", "print_result")
t = cpu()
cli.main(["run", "scenarios/paper-ib-2x8.toml", "--kernel", "gemm_ar", "--m", "32768", "--n", "32768", "--k", "2048",
          "--no-collapse"])
parts["cli.main"] = cpu() - t
atexit.register(lambda: os.write(2, (" ".join(f"{k}={v:.3f}" for k, v in parts.items())
                                     + f" at-exit={cpu():.3f}\n").encode()))
