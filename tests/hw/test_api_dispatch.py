"""The torch API's path rule and its torch paths, on the CPU: which path a call takes and why
(hw/dispatch.py), that auto at world 1 is torch itself, that shapes the kernel cannot run take the
torch path instead of raising, and that the torch paths (NCCL/gloo collectives + matmul, the
zigzag-causal attention merge, the MoE gather + per-expert matmul) equal their float64 references
on 1, 2 and 4 gloo ranks. GPU runs of the same API: tests/hw/test_hw_api.py."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the torch API needs torch (pip install torch)")

from harness.gloo import ranks  # noqa: E402

from mkernel.errors import InputError  # noqa: E402
from mkernel.hw import dispatch  # noqa: E402

H200 = "NVIDIA H200"


def call(op="gemm_ar", m=8192, n=8192, k=512, world=2, gpn=2, device=H200, objection=None, topk=1):
    return dispatch.Call(op, m, n, k, world, gpn, device, objection, topk)


def test_world_1_always_takes_the_torch_path_in_auto():
    d = dispatch.decide(call(world=1, gpn=1))
    assert d.path == "fallback" and "one rank" in d.reason


def test_the_kernels_objection_sends_auto_to_torch_and_fused_to_an_error():
    bad = call(objection="K = 97 and N = 64 must be multiples of 8")
    d = dispatch.decide(bad)
    assert d.path == "fallback" and "K = 97" in d.reason
    with pytest.raises(InputError, match="mode='fused', but the fused kernel cannot run this call: K = 97"):
        dispatch.decide(bad, "fused")
    assert dispatch.decide(bad, "fallback").path == "fallback"


def test_auto_follows_the_measured_table_and_its_margin():
    fast = dispatch.decide(call("ag_gemm", 16384, 1024, 16384))
    assert fast.path == "fused" and "1.74x" in fast.reason and "nvlink" in fast.reason
    slow = dispatch.decide(call("gemm_ar", 8192, 8192, 512))
    assert slow.path == "fallback" and "0.69x" in slow.reason
    near_one = dispatch.decide(call("moe_dispatch_gemm", 8192, 2048, 7168, topk=8))
    assert near_one.path == "fallback" and "1.03x" in near_one.reason  # within noise: not worth it


def test_no_measurement_means_the_torch_path():
    for c in (call(world=8, gpn=8), call(device="NVIDIA A100-SXM4-80GB"), call("ag_gemm", 256, 64, 64)):
        d = dispatch.decide(c)
        assert d.path == "fallback" and "no measurement" in d.reason, d


def test_an_unknown_mode_is_refused():
    with pytest.raises(InputError, match="mode='fastest' is not one of auto, fused, fallback"):
        dispatch.decide(call(), "fastest")


def test_every_table_row_names_its_source_and_a_plausible_speedup():
    rows = [r for table in dispatch._table().values() for r in table]
    assert rows and all(r["source"] and 0.1 < r["speedup"] < 10 for r in rows)


def test_nearest_stays_within_its_factor():
    here = dispatch.work("gemm_ar", 8192, 8192, 512, 2)
    assert dispatch.nearest(call()) is not None
    assert dispatch.work("gemm_ar", 2048, 2048, 128, 2) < here / dispatch.NEAREST  # the measured rows' spacing
    assert dispatch.nearest(call(m=64, n=64, k=64)) is None


# ---- the public ops at world 1 (no torch.distributed needed) ----

def test_gemm_ops_at_world_1_are_torch_matmul_itself():
    import mkernel

    a, b = torch.randn(70, 40), torch.randn(40, 24)
    for op in (mkernel.gemm_ar, mkernel.gemm_rs, mkernel.ag_gemm):
        assert torch.equal(op(a, b), a @ b)
        assert torch.equal(op(a, b, mode="fallback"), a @ b)


def test_shapes_the_kernel_cannot_run_take_the_torch_path_in_auto():
    import mkernel

    bf = torch.bfloat16
    a, b = torch.randn(64, 97, dtype=bf), torch.randn(97, 64, dtype=bf)  # rows of 97 bf16: not 16-byte vectors
    assert torch.equal(mkernel.gemm_ar(a, b), a @ b)
    empty = mkernel.gemm_ar(torch.randn(0, 32, dtype=bf), torch.randn(32, 64, dtype=bf))
    assert empty.shape == (0, 64)
    with pytest.raises(InputError, match="cannot run this call"):
        mkernel.gemm_ar(a, b, mode="fused")


def test_explain_says_the_path_and_why(capsys):
    import mkernel

    d = mkernel.explain("gemm_rs", torch.randn(8, 16), torch.randn(16, 8))
    assert d.path == "fallback" and "one rank" in capsys.readouterr().out
    with pytest.raises(InputError, match="unknown op 'gemm'"):
        mkernel.explain("gemm", None, None)


def test_bad_arguments_raise_in_every_mode():
    import mkernel

    for mode in ("auto", "fallback", "fused"):
        with pytest.raises(InputError, match="gpus_per_node=3 must divide the group's 1 ranks"):
            mkernel.gemm_ar(torch.randn(4, 8), torch.randn(8, 4), gpus_per_node=3, mode=mode)
        with pytest.raises(InputError, match="must be 2-D with one K"):
            mkernel.gemm_ar(torch.randn(4, 8), torch.randn(7, 4), mode=mode)
        with pytest.raises(InputError, match="must share one"):
            mkernel.ring_attention(torch.randn(1, 2, 8, 64), torch.randn(1, 1, 8, 64), torch.randn(1, 2, 8, 64),
                                   mode=mode)


def test_attention_at_world_1_matches_the_float64_reference():
    import mkernel
    from mkernel.hw import fallbacks

    q, k, v = (torch.randn(2, 3, 40, 64) for _ in range(3))
    for causal in (False, True):
        out, lse = mkernel.ring_attention(q, k, v, causal=causal)
        ref, ref_lse = fallbacks.reference_ring_attention(q, k, v, causal=causal)
        assert _rel(out, ref) < 1e-5 and _rel(lse, ref_lse) < 1e-5


def _rel(x, y) -> float:
    return float((x.double() - y.double()).norm() / y.double().norm())


# ---- the torch paths on gloo ranks (every rank a CPU process) ----

def _collective_errors(rank: int, world: int) -> dict:
    from mkernel.hw import fallbacks as f

    g = torch.Generator().manual_seed(rank)
    a, b = torch.randn(12 * world, 24, generator=g), torch.randn(24, 16, generator=g)
    al = torch.randn(5, 24, generator=g)
    q, k, v = (torch.randn(2, 3, 10, 32, generator=g) for _ in range(3))
    err = {"gemm_ar": _rel(f.fallback_gemm_ar(a, b), f.reference_gemm_ar(a, b)),
           "gemm_rs": _rel(f.fallback_gemm_rs(a, b), f.reference_gemm_rs(a, b)),
           "ag_gemm": _rel(f.fallback_ag_gemm(al, b), f.reference_ag_gemm(al, b))}
    for causal in (False, True):
        out, lse = f.fallback_ring_attention(q, k, v, causal=causal)
        ref, ref_lse = f.reference_ring_attention(q, k, v, causal=causal)
        err[f"attention causal={causal}"] = max(_rel(out, ref), _rel(lse, ref_lse))
    return err


@pytest.mark.parametrize("world", [2, 4])
def test_the_torch_paths_match_the_float64_references_on_gloo_ranks(world):
    """The zigzag causal path attends each query half to the whole chunks before it and, causally,
    to its own chunk, merged by lse: it must agree with the masked float64 reference."""
    for _rank, err in ranks(world, _collective_errors):
        assert max(err.values()) < 1e-5, err


def _moe_errors(rank: int, world: int) -> float:
    from mkernel.hw import fallbacks as f
    from mkernel.problems import Workload

    experts, topk, tokens, hidden, width = 2 * world, 2, 12, 16, 8
    rng = torch.Generator().manual_seed(11)  # every rank draws every rank's routing alike
    routes = tuple(tuple(tuple(int(e) for e in torch.randperm(experts, generator=rng)[:topk]) for _ in range(tokens))
                   for _ in range(world))
    w = Workload(kernel="moe_dispatch_gemm", m=tokens * world, n=width, k=hidden, experts=experts, topk=topk,
                 routes=routes)
    sources = f.moe_sources(w, rank, 1, world)
    rows = f.moe_rows(sources, tokens, hidden, experts // world, "cpu")
    g = torch.Generator().manual_seed(rank)
    x, wt = torch.randn(tokens, hidden, generator=g), torch.randn(experts // world * hidden, width, generator=g)
    got, ref = f.fallback_moe(x, wt, rows), f.reference_moe(x, wt, rows)
    # every routed (token, expert) pair is one row, computed from the right token and expert
    picked = sum(1 for t in range(tokens) for r in range(world) for e in routes[r][t] if e // 2 == rank)
    assert int((sources[:, 0] >= 0).sum()) == picked
    return _rel(got, ref)


@pytest.mark.parametrize("world", [1, 2])
def test_the_moe_torch_path_matches_its_reference(world):
    for _rank, err in ranks(world, _moe_errors):
        assert err < 1e-6, err


def test_the_moe_torch_path_is_one_grouped_gemm_and_the_per_expert_loop_under_autograd(monkeypatch):
    """Without autograd the torch path is one torch._grouped_mm (256 experts as 256 matmuls cost
    8.8 ms of host time per call on the H200); under autograd it keeps one matmul per expert, whose
    backward takes the zero-stride gradient of ``y.sum()`` (the grouped GEMM's refuses it). Both give
    the float64 reference's rows, an expert with no rows included."""
    from mkernel.hw import fallbacks as f

    if not hasattr(torch, "_grouped_mm"):
        pytest.skip(f"torch {torch.__version__} has no _grouped_mm")
    experts, hidden, width = 4, 16, 8
    sources = torch.tensor([[0, t, e] for t, e in ((0, 0), (3, 0), (1, 2), (2, 2), (5, 3))] + [[-1, -1, -1]])
    rows = f.moe_rows(sources, 6, hidden, experts, "cpu")  # expert 1 receives nothing
    x, w = torch.randn(6, hidden), torch.randn(experts * hidden, width)
    grouped = []
    monkeypatch.setattr(f, "_grouped", lambda *a, _g=f._grouped: grouped.append(_g(*a)) or grouped[-1])
    got, ref = f.fallback_moe(x, w, rows), f.reference_moe(x, w, rows)
    assert grouped == [True] and _rel(got, ref) < 1e-6
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    y = f.fallback_moe(xg, wg, rows)
    y.sum().backward()
    assert grouped[-1] is False and _rel(y.detach(), ref) < 1e-6
    assert wg.grad[hidden:2 * hidden].abs().max() == 0 and xg.grad[4].abs().max() == 0  # nothing routed there


def test_a_grouped_gemm_that_torch_refuses_warns_once_and_the_loop_takes_over(monkeypatch):
    """A torch whose grouped GEMM refuses the operands (a layout or alignment rule of its build):
    one RuntimeWarning naming why, the per-expert loop from then on, the same rows."""
    from mkernel.hw import fallbacks as f

    if not hasattr(torch, "_grouped_mm"):
        pytest.skip(f"torch {torch.__version__} has no _grouped_mm")
    calls = []

    def refuse(*a, **k):
        calls.append(1)
        raise RuntimeError("mat_b must be column-major")
    monkeypatch.setattr(torch, "_grouped_mm", refuse)
    monkeypatch.setattr(f, "_REFUSED", {})
    sources = torch.tensor([[0, 0, 0], [0, 1, 1], [0, 2, 1]])
    rows = f.moe_rows(sources, 3, 16, 2, "cpu")
    x, w = torch.randn(3, 16), torch.randn(32, 8)
    with pytest.warns(RuntimeWarning, match="column-major"):
        got = f.fallback_moe(x, w, rows)
    again = f.fallback_moe(x, w, rows)
    assert len(calls) == 1 and _rel(got, f.reference_moe(x, w, rows)) < 1e-6 and torch.equal(got, again)


def test_close_forgets_the_bound_calls_so_a_later_call_binds_again():
    """A call bound before close() held the closed executor: after close() it must bind anew
    (a stale binding would launch the fused kernel on freed symmetric memory)."""
    import torch

    import mkernel
    from mkernel.hw import api

    a, b = torch.randn(64, 32), torch.randn(32, 16)
    mkernel.gemm_ar(a, b, mode="fallback")
    assert api._BOUND, "the call was not bound"
    mkernel.close()
    assert not api._BOUND
    torch.testing.assert_close(mkernel.gemm_ar(a, b, mode="fallback"), a @ b)
