"""The GPU check of the 2026-12-05 GEMM+RS fault failure (docs/results/2026-12-05-gemm-rs-faults.md):
which of the two differences from the passing plain run (the injected fault, the 2 s bound on the
call barrier) makes GEMM+RS's first call time out on the emulated 2 x 2, whether launching the entry
kernel first (as every other op does) changes it, with ag_gemm (which passes both faults) as the
control. One line per run: PASS, or FAIL with every rank's error line (each with
the wall-clock time that rank launched the failed call), and the run's seconds.

    python -c "import sys; sys.path.insert(0, 'tests'); from harness import faultcheck; faultcheck.main()"
"""
from __future__ import annotations

import time

from mkernel.hw.runtime.proxy import ProxyFaults

from .cases import assert_exact, run_case

DELAY, REORDER = ProxyFaults(delay_us=30.0), ProxyFaults(seed=1, reorder=True)


def entered_rank(info, *args) -> dict:
    """:func:`harness.rank.run_rank` with the entry kernel (``sync.enter_kernel``) launched before
    every call, as the executor does for every op but GEMM+RS (it stages nothing and has no heap
    output): whether GEMM+RS's fused kernel being its process's first launch of a call matters."""
    import torch

    from mkernel.hw.runtime.executor import Executor

    from .rank import run_rank

    plain = Executor.__call__

    def entered(self, inputs, out=None, *, poison=False):
        stream = torch._C._cuda_getCurrentRawStream(self.device.index)
        if not self.kernel.enter.cached(stream, ()):
            self.kernel.enter(stream, key=())
        return plain(self, inputs, out, poison=poison)

    Executor.__call__ = entered  # this rank process only
    return run_rank(info, *args)


# (case, label, faults, bound on every wait, the call barrier's included, rank function)
RUNS = (("gemm_rs", "plain 2 s", None, 2.0, None), ("gemm_rs", "delay 5 s", DELAY, 5.0, None),
        ("gemm_rs", "reorder 5 s", REORDER, 5.0, None), ("gemm_rs", "delay 2 s", DELAY, 2.0, None),
        ("gemm_rs", "delay 2 s, entry kernel first", DELAY, 2.0, entered_rank),
        ("gemm_rs", "plain 2 s again", None, 2.0, None), ("ag_gemm", "plain 2 s", None, 2.0, None))


def main(runs=RUNS) -> None:
    from mkernel.hw.runtime.emulate import RankFailed

    for case, label, faults, wait_s, rank_fn in runs:
        t0 = time.perf_counter()
        try:
            assert_exact(run_case(case, 2, 2, faults=faults, wait_s=wait_s, rank_fn=rank_fn), 3)
            verdict = "PASS"
        except (RankFailed, AssertionError) as exc:
            lines = str(exc).splitlines()
            ranks = [ln.strip() for ln in lines if ln.startswith("  rank ")]
            verdict = "FAIL " + " | ".join(ranks or lines[-1:])
        print(f"{case} {label}: {verdict} ({time.perf_counter() - t0:.1f} s)", flush=True)
