"""Faults injected into the hw path (issue 10): the proxy's seeded faults under the fused kernels on
the emulated 2x2 cluster, loopback transport between the two "nodes" (marked gpu). Each fault either
leaves the outputs exact (checked against the oracle, poisoned before every call) or fails the call
with a clear error within the timeout: never silent corruption, never a hang.
"""
from __future__ import annotations

import pytest

from harness.cases import CASES, assert_exact, run_case, workload

from mkernel.hw.runtime.proxy import ProxyFaults

EXACT = {"reorder": ProxyFaults(seed=1, reorder=True), "delay": ProxyFaults(delay_us=30.0)}
FATAL = {"drop": (ProxyFaults(seed=2, drop=1.0), r"injected drop|aborted"),  # the first message is lost
         "die": (ProxyFaults(die_after=3), r"proxy thread is dead|timeout|aborted")}


@pytest.mark.gpu
@pytest.mark.parametrize("fault", sorted(EXACT))
@pytest.mark.parametrize("case", sorted(CASES))
def test_survivable_faults_leave_outputs_exact(case, fault):
    assert_exact(run_case(case, 2, 2, faults=EXACT[fault], wait_s=2.0), 3)


@pytest.mark.gpu
@pytest.mark.parametrize("fault", sorted(FATAL))
@pytest.mark.parametrize("case", sorted(CASES))
def test_fatal_faults_end_in_a_clear_error_within_the_timeout(case, fault):
    import time

    from mkernel.hw.runtime.emulate import RankFailed

    faults, pattern = FATAL[fault]
    t0 = time.perf_counter()
    with pytest.raises(RankFailed, match=pattern):
        run_case(case, 2, 2, faults=faults, wait_s=2.0, barrier_s=2.0)  # a dead peer ends the barrier too
    assert time.perf_counter() - t0 < 120  # waits of 2 s each, plus process start-up


@pytest.mark.gpu
def test_a_failed_call_raises_from_the_next_call_without_check():
    """Nothing calls check() after each torch op: a call that failed (its outputs are wrong) must
    raise from the executor's next call once it has finished, on every rank."""
    from harness import rank

    from mkernel.hw.runtime.emulate import launch

    raised = launch(rank.unchecked_rank, 4, args=(workload("gemm_ar"), 2, 2, FATAL["drop"][0]), timeout_s=300)
    print("call that raised, per rank:", [r and r[0] for r in raised])
    for r in raised:
        assert r is not None and r[0] == 2 and any(w in r[1] for w in ("timeout", "aborted", "drop")), raised
