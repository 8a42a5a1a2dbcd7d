"""The GPU check of the 2026-12-05 GEMM+RS fault failure (docs/results/2026-12-05-gemm-rs-faults.md):
which of the two differences from the passing plain run (the injected fault, the 2 s bound on the
call barrier) makes GEMM+RS's first call time out on the emulated 2 x 2, with ag_gemm (which passes
both faults) as the control. One line per run: PASS, or FAIL with every rank's error line (each with
the wall-clock time that rank launched the failed call), and the run's seconds.

    python -c "import sys; sys.path.insert(0, 'tests'); from harness import faultcheck; faultcheck.main()"
"""
from __future__ import annotations

import time

from mkernel.hw.runtime.proxy import ProxyFaults

from .cases import assert_exact, run_case

DELAY, REORDER = ProxyFaults(delay_us=30.0), ProxyFaults(seed=1, reorder=True)
# (case, label, faults, bound on every wait, the call barrier's included)
RUNS = (("gemm_rs", "plain 2 s", None, 2.0), ("gemm_rs", "delay 5 s", DELAY, 5.0), ("gemm_rs", "reorder 5 s", REORDER, 5.0),
        ("gemm_rs", "delay 2 s", DELAY, 2.0), ("gemm_rs", "plain 2 s again", None, 2.0), ("ag_gemm", "plain 2 s", None, 2.0))


def main(runs=RUNS) -> None:
    from mkernel.hw.runtime.emulate import RankFailed

    for case, label, faults, wait_s in runs:
        t0 = time.perf_counter()
        try:
            assert_exact(run_case(case, 2, 2, faults=faults, wait_s=wait_s), 3)
            verdict = "PASS"
        except (RankFailed, AssertionError) as exc:
            lines = str(exc).splitlines()
            ranks = [ln.strip() for ln in lines if ln.startswith("  rank ")]
            verdict = "FAIL " + " | ".join(ranks or lines[-1:])
        print(f"{case} {label}: {verdict} ({time.perf_counter() - t0:.1f} s)", flush=True)
