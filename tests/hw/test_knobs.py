"""The hw runtime's knobs: declared once (mkernel/hw/knobs.py), their defaults as they were, bad
values refused where the knobs are built, and every function that takes one as a keyword
defaulting to that one declaration."""
from __future__ import annotations

import inspect

import pytest

from mkernel.errors import InputError
from mkernel.hw.knobs import DEFAULTS, HwKnobs


def test_the_defaults_are_the_values_the_runtime_had():
    assert DEFAULTS == HwKnobs(timeout_s=5.0, drain_timeout_s=5.0, ring_capacity=1024, window_us=2.0,
                               loopback_inflight=0, copy_rows=64)
    assert HwKnobs(timeout_s=2.5).timeout_ns == 2_500_000_000
    # the waits on peers' progress between calls have their own, NCCL-like bound (issue: training on
    # the emulated 2x2 timed out in the call barrier while a peer was still busy on the host)
    assert DEFAULTS.barrier_timeout_s == 300.0 and HwKnobs(barrier_timeout_s=1.5).barrier_timeout_ns == 1_500_000_000


def test_the_call_barrier_and_staging_wait_take_the_barrier_bound_and_data_waits_the_short_one():
    """The kernel's waits for peers entering a call (and staging's for peers finishing the last one)
    are bounded by ``barrier_timeout_ns``; every wait inside a call by ``timeout_ns``."""
    import ast
    from pathlib import Path

    from mkernel.hw.kernels import fused

    src = Path(fused.__file__).read_text()
    body = src[src.index("    if BARRIER:"):src.index("    movable = b0 + b1")]
    waits = sorted((n for n in ast.walk(ast.parse("if True:\n" + body)) if isinstance(n, ast.Call)
                    and getattr(n.func, "id", "") == "_wait"), key=lambda n: n.lineno)
    assert len(waits) == 2 and waits[0].args[7].id == "barrier_timeout_ns", body  # block 0: each peer's arrival
    # the other blocks' wait for block 0's go outlasts block 0's wait for a peer, so the error recorded
    # first names the peer that never entered (2026-12-05: a go-flag timeout hid it); the sum's value, in
    # 64 bits, is test_hw_sync's
    assert ast.unparse(waits[1].args[7]) == "_go_bound(barrier_timeout_ns, timeout_ns)", body
    assert "barrier_timeout_ns" not in src[src.index("def _serve("):src.index("def signature(")]
    launch_src = Path(fused.__file__).parents[1].joinpath("runtime", "fused_launch.py").read_text()
    assert "timeout_ns=ctx.knobs.barrier_timeout_ns, err32" in launch_src  # the enter kernel's peer wait


@pytest.mark.parametrize("bad", [dict(loopback_inflight=-1), dict(timeout_s=0), dict(drain_timeout_s=-1.0), dict(barrier_timeout_s=0),
                                 dict(ring_capacity=0), dict(copy_rows=0), dict(window_us=-0.5)])
def test_a_bad_knob_is_refused_where_the_knobs_are_built(bad):
    (name, value), = bad.items()
    with pytest.raises(InputError, match=f"{name}={value}"):
        HwKnobs(**bad)


def test_a_data_path_that_does_not_exist_is_refused_with_the_ones_that_do():
    with pytest.raises(InputError, match="data_path='tma': one of register, auto, bulk"):
        HwKnobs(data_path="tma")
    pytest.importorskip("triton", reason="triton is not installed (pip install 'mkernel[test]')")
    from mkernel.hw.kernels import fused

    assert [fused.constexprs(frozenset({"copy"}), 64, barrier=False, data_path=p)["DATA"]
            for p in ("register", "auto", "bulk")] == [int(fused.DATA_REGISTER), int(fused.DATA_AUTO),
                                                       int(fused.DATA_BULK)]


def _default(fn, name):
    return inspect.signature(fn).parameters[name].default


def test_every_keyword_default_is_the_declared_one():
    from mkernel.hw.runtime.context import Context
    from mkernel.hw.runtime.executor import Executor
    from mkernel.hw.runtime.proxy import Proxy

    assert _default(Context.__init__, "knobs") is DEFAULTS
    assert not {"timeout_s", "copy_rows"} & set(inspect.signature(Executor.__init__).parameters)  # the context's
    assert _default(Proxy.__init__, "window_us") == DEFAULTS.window_us
    assert _default(Proxy.stop, "timeout_s") == DEFAULTS.drain_timeout_s


def test_the_kernels_and_the_self_test_take_the_declared_defaults():
    pytest.importorskip("triton", reason="triton is not installed (pip install 'mkernel[test]')")
    from mkernel.hw.kernels import fused, gemm
    from mkernel.hw.measure import selftest

    assert _default(fused.constexprs, "copy_rows") == DEFAULTS.copy_rows
    assert fused.constexprs(frozenset({"copy"}), 64, barrier=False)["CR"] == 64
    assert _default(gemm.gemm, "timeout_s") == DEFAULTS.timeout_s
    pair = selftest.LocalPair.__init__
    assert (_default(pair, "capacity"), _default(pair, "window_us"), _default(pair, "timeout_s")) == (
        DEFAULTS.ring_capacity, DEFAULTS.window_us, DEFAULTS.timeout_s)


def test_the_public_api_takes_knobs_before_its_first_executor_and_refuses_them_after():
    """``mkernel.configure(HwKnobs(...))``: the knobs of every executor built after it (a user's
    timeouts, as NCCL's); wrong types and late calls are one clear error, and nothing changes."""
    pytest.importorskip("torch", reason="the torch API's executors need torch")
    import mkernel
    from mkernel.hw import ops

    assert ops._KNOBS[0] == DEFAULTS
    with pytest.raises(InputError, match=r"configure\(knobs\): an HwKnobs is needed, got dict"):
        mkernel.configure({"timeout_s": 1.0})
    quick = HwKnobs(barrier_timeout_s=30.0)
    try:
        mkernel.configure(quick)
        assert ops._KNOBS[0] is quick
        ops._EXECUTORS[("stand-in",)] = (None, None)  # as after a first fused call
        with pytest.raises(InputError, match=r"1 executors already run .* call mkernel.close\(\) first"):
            mkernel.configure(DEFAULTS)
        assert ops._KNOBS[0] is quick
    finally:
        ops._EXECUTORS.pop(("stand-in",), None)
        mkernel.configure(DEFAULTS)
    assert ops._KNOBS[0] == DEFAULTS
