"""The adaptive SM partition on hw (issue 7): the policy compiled into the fused kernel, the plan's
work column it sums, and (marked gpu) the kernel's role changes on an emulated 2x2 cluster with
outputs checked, its state reset across calls, and the device policy against the Python one.

CI compiles the adaptive kernel for sm_90a (no GPU needed); the policy is one function,
:func:`mkernel.controller.split`, that the simulator calls and the kernel compiles.
"""
from __future__ import annotations

import numpy as np
import pytest
from harness.cases import CASES, assert_exact, run_case, workload

from mkernel import Cluster
from mkernel.builders import get
from mkernel.controller import Balance, ns, split
from mkernel.hw.lowering import plan
from mkernel.hw.lowering.layout import Task
from mkernel.cost import sm_work_us

triton = pytest.importorskip("triton", reason="triton is not installed (pip install 'mkernel[test]' pins 3.6.0)")
tl = triton.language
fused = pytest.importorskip("mkernel.hw.kernels.fused")
adaptive = pytest.importorskip("mkernel.hw.kernels.adaptive")

# a restless policy: no hysteresis, no NVLink floor, so blocks change roles as often as the policy lets them
RESTLESS = Balance(min_sms=1, hysteresis=0, link_sms=1)


def test_the_work_column_holds_each_tasks_cost_model_estimate_in_ns():
    c = Cluster("t", 2, 2)
    s = get("gemm_rs").build(workload("gemm_rs"), c)
    itemsize = {b.name: b.itemsize for b in s.buffers}
    p = plan.build(s, 1, lambda t: sm_work_us(t, itemsize, c))[0]
    want = [max(1, ns(sm_work_us(s.tasks[int(row[Task.TASK_ID])], itemsize, c))) for row in p.tasks]
    assert p.tasks[:, Task.WORK_NS].tolist() == want
    assert (plan.build(s, 1)[0].tasks[:, Task.WORK_NS] == 0).all()  # static plans carry no estimates


@pytest.mark.parametrize("ops", ["gemm copy reduce put", "attn norm copy put", "gemm gather put"])
def test_the_adaptive_kernel_compiles_for_sm90a(ops):
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig, const = fused.signature(frozenset(ops.split()), 64, adaptive=True)
    k = triton.compile(ASTSource(fn=fused.fused_kernel, signature=sig, constexprs=const),
                       target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": fused.NUM_WARPS, "num_stages": fused.NUM_STAGES})
    ptx = k.asm["ptx"]
    assert ".target sm_90a" in ptx and "globaltimer" in ptx and "multimem" not in ptx


def test_the_control_word_packs_the_fields_the_kernel_reads():
    word = adaptive.control_word(target=7, active_compute=25, active_intra=7)
    field = int(adaptive.FIELD)
    assert (word >> int(adaptive.TARGET)) & field == 7
    assert (word >> int(adaptive.ACTIVE)) & field == 25 and (word >> (int(adaptive.ACTIVE) + 8)) & field == 7
    assert (word >> int(adaptive.BLOCKED)) & 0xFFFF == 0  # nothing blocked at the start
    assert adaptive.work_units(1) == 1 and adaptive.work_units(int(adaptive.UNIT_NS)) == 1
    assert adaptive.work_units(int(adaptive.UNIT_NS) + 1) == 2


@triton.jit
def _policy_rows(x, out):
    """The kernel's policy (``adaptive._policy``) on row ``program_id`` of ``x`` (its 9 arguments)."""
    row = x + tl.program_id(0) * 9
    got = adaptive._policy(tl.load(row), tl.load(row + 1), tl.load(row + 2), tl.load(row + 3), tl.load(row + 4),
                           tl.load(row + 5), tl.load(row + 6), tl.load(row + 7), tl.load(row + 8))
    tl.store(out + tl.program_id(0), got)


@pytest.mark.gpu
def test_the_gpu_runs_the_policy_the_simulator_runs():
    """The policy compiled into the kernel gives the Python function's answer on 4,000 random
    states, including roles without work and blocked counts above the movable SMs."""
    import torch

    rng = np.random.default_rng(5)
    n = 4000
    movable = rng.integers(2, 133, n)
    work = [rng.integers(0, 10**12, n) * (rng.random(n) > 0.1) for _ in range(2)]
    x = np.stack([movable, *work, rng.integers(0, 133, n) % movable, rng.integers(0, 40, n), rng.integers(0, 40, n),
                  rng.integers(1, 4, n), rng.integers(0, 4, n), rng.integers(1, 40, n)], axis=1).astype(np.int64)
    out = torch.full((n,), -7, dtype=torch.int64, device="cuda")
    _policy_rows[(n,)](torch.from_numpy(x).cuda(), out)
    assert out.cpu().tolist() == [split(*map(int, row)) for row in x]


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(CASES))
def test_emulated_2x2_adaptive(case):
    """Compute and intra blocks change roles at task boundaries, and the outputs stay exact (poisoned
    before each of 3 calls). Each call's trajectory starts at the initial split and changes at least
    once: when one role's queue empties, the other gets every movable block."""
    results = run_case(case, 2, 2, controller=RESTLESS)
    assert_exact(results, 3)
    for r in results:
        movable = r["blocks"][0] + r["blocks"][1]
        points = r["trajectory"]
        assert points[0][0] == 0.0 and len(points) >= 2, points
        assert all(0 <= target <= movable for _, target in points), points
        assert points[-1][1] in (0, movable), points  # the last change: a role ran out of tasks


@pytest.mark.gpu
def test_emulated_2x2_adaptive_hundred_calls_reset_the_controller_state():
    """Claims, active counts and the target return to the initial split after every call."""
    results = run_case("gemm_rs", 2, 2, calls=100, controller=RESTLESS)
    assert_exact(results, 100)
    assert all(len(r["trajectory"]) >= 2 for r in results)
