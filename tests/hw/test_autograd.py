"""The backward of every op, and training with it, on the CPU: 1, 2 and 4 gloo ranks, float64,
small odd shapes.

Gradients. The oracle is independent of the distributed code: every rank draws every rank's
inputs and output gradients (seeded by rank), writes the whole computation with plain torch
(cat, matmul, a masked softmax over sequence positions, the MoE rows picked by index) in one
process, and lets torch's autograd differentiate it; then it compares its own shard's gradients
with what each path gives:

- ``api``: the public op (auto: at world 1 torch.matmul; at world > 1 the torch path recorded as
  ``torch.ops.mkernel.torch_*``, whose backward is the shared formula of hw/autograd.py);
- ``fallback``: ``mkernel.fallback_*`` themselves (differentiable collectives, attention's exact lse
  gradient through the zigzag merge);
- ``fused-op``: the fused op ``torch.ops.mkernel.*`` with its registered backward, its forward
  stood in for on the CPU by the torch path (the kernel needs a GPU; the backward formula is what
  is checked here).

Training (tests/harness/training.py): a two-layer TP MLP (gemm_rs or gemm_ar after ag_gemm) and a
ring-attention block (sequence split over the ranks, zigzag when causal), 20 SGD steps against
the same model written with torch only, loss by loss, and the weights after; float64 and
(the MLP) float32; at world 2 also under ``torch.compile(fullgraph=True, dynamic=False,
backend="aot_eager")``.

Attention's torch path computes in float32 on the CPU (hw/fallbacks.py), so its bounds are
looser; every other path is float64 throughout. GPU runs: tests/hw/test_train.py.
"""
from __future__ import annotations

import functools

import pytest

torch = pytest.importorskip("torch", reason="autograd of the torch ops needs torch (pip install torch)")

from harness.training import grads_of  # noqa: E402 - gradients of sum(<output, cotangent>)
from harness.gloo import ranks  # noqa: E402

F64 = torch.float64
EXACT = 1e-10  # float64 paths
ATTENTION = 1e-5  # the CPU attention kernel computes in float32, even on float64 inputs
TRAIN = {"float64": 1e-10, "float32": 1e-5, "attention": 1e-6}  # relative loss difference, any step


def _rel(x, y) -> float:
    return float((x.double() - y.double()).norm() / y.double().norm().clamp_min(1e-300))


def _draw(seed: int, *shapes):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g, dtype=F64) for s in shapes]


def stand_in_kernels() -> None:
    """CPU kernels for the fused ops: each op's torch path, so their backward formulas run here."""
    from mkernel.hw import fallbacks as f
    from mkernel.hw import ops

    def gemm(fallback):
        return lambda a, b, group_name, gpus_per_node, sms, mode="auto": fallback(a, b, group_name or None)

    for op, fallback in (("gemm_ar", f.fallback_gemm_ar), ("gemm_rs", f.fallback_gemm_rs),
                         ("ag_gemm", f.fallback_ag_gemm)):
        torch.library.register_kernel(f"mkernel::{op}", "cpu", gemm(fallback))
    torch.library.register_kernel(
        "mkernel::ring_attention", "cpu", lambda q, k, v, causal, group_name, gpus_per_node, sms, mode="auto":
        f.fallback_ring_attention(q, k, v, group_name or None, causal=causal))
    torch.library.register_kernel(
        "mkernel::moe_dispatch_gemm", "cpu", lambda x, w, handle_id:
        f.fallback_moe(x, w, ops.handle(handle_id).torch_rows, ops.handle(handle_id).group_name or None))


# ---- GEMM ops ----

def _gemm_case(op: str, rank: int, world: int):
    """(every rank's a and b, every rank's output gradient) on odd shapes."""
    shape_a = {"ag_gemm": (5, 7), "gemm_rs": (3 * world, 7), "gemm_ar": (5, 7)}[op]
    n = {"ag_gemm": 3, "gemm_rs": 5, "gemm_ar": 3}[op]
    rows = {"ag_gemm": 5 * world, "gemm_rs": 3, "gemm_ar": 5}[op]
    ab = [_draw(r, shape_a, (shape_a[1], n)) for r in range(world)]
    # gemm_ar's output is replicated, and so is its gradient (every rank computes the same loss)
    grads = [_draw(100 + (0 if op == "gemm_ar" else r), (rows, n))[0] for r in range(world)]
    return ab, grads


def _gemm_oracle(op: str, ab, grads, rank: int, world: int):
    leaves = [[t.clone().requires_grad_() for t in pair] for pair in ab]
    a_all = [p[0] for p in leaves]
    if op == "ag_gemm":
        loss = sum((torch.cat(a_all) @ b * g).sum() for (_, b), g in zip(leaves, grads))
    else:
        total = sum(a @ b for a, b in leaves)
        if op == "gemm_ar":
            loss = (total * grads[0]).sum()
        else:
            loss = sum((part * g).sum() for part, g in zip(total.chunk(world), grads))
    loss.backward()
    return [t.grad for t in leaves[rank]]


def _gemm_paths(op: str) -> dict:
    import mkernel
    from mkernel.hw.groups import group_info

    name = group_info(None).name
    paths = {"api": getattr(mkernel, op),
             "fallback-mode": lambda a, b: getattr(mkernel, op)(a, b, mode="fallback"),
             "fallback": getattr(mkernel, f"fallback_{op}"),
             "fused-op": lambda a, b: getattr(torch.ops.mkernel, op)(a, b, name, 0, 0, "auto"),
             "torch-op": lambda a, b: torch.ops.mkernel.torch_gemm(a, b, op, name, 0, 0, "auto")}
    return paths


# ---- ring attention ----

B, H, D = 1, 2, 8


def _positions(rank: int, world: int, s: int, causal: bool) -> torch.Tensor:
    """Sequence positions of a rank's rows: its block (non-causal) or its zigzag chunks."""
    i = torch.arange(s)
    if not causal:
        return rank * s + i
    half = s // 2
    return torch.where(i < half, rank * half + i, (2 * world - 1 - rank) * half + i - half)


def _attention_oracle(qkv, cot, rank: int, world: int, causal: bool):
    leaves = [[t.clone().requires_grad_() for t in triple] for triple in qkv]
    s = qkv[0][0].shape[2]
    kk = torch.cat([t[1] for t in leaves], dim=2)
    vv = torch.cat([t[2] for t in leaves], dim=2)
    keys = torch.cat([_positions(r, world, s, causal) for r in range(world)])
    loss = 0
    for r, ((q, _, _), (g_out, g_lse)) in enumerate(zip(leaves, cot)):
        scores = q @ kk.transpose(-1, -2) / D ** 0.5
        if causal:
            scores = scores.masked_fill(keys[None, :] > _positions(r, world, s, causal)[:, None], float("-inf"))
        out = torch.softmax(scores, dim=-1) @ vv
        loss = loss + (out * g_out).sum() + (torch.logsumexp(scores, dim=-1) * g_lse).sum()
    loss.backward()
    return [t.grad for t in leaves[rank]]


def _attention_paths(causal: bool) -> dict:
    import mkernel
    from mkernel.hw.groups import group_info

    name = group_info(None).name
    return {"api": lambda q, k, v: mkernel.ring_attention(q, k, v, causal=causal),
            "fallback": lambda q, k, v: mkernel.fallback_ring_attention(q, k, v, causal=causal),
            "fused-op": lambda q, k, v: torch.ops.mkernel.ring_attention(q, k, v, causal, name, 0, 0, "auto")}


# ---- MoE ----

def _moe_case(world: int):
    from mkernel.problems import Workload

    experts, topk, tokens, hidden, width = 2 * world, 2, 5, 6, 4
    rng = torch.Generator().manual_seed(11)  # every rank draws every rank's routing alike
    routes = tuple(tuple(tuple(int(e) for e in torch.randperm(experts, generator=rng)[:topk]) for _ in range(tokens))
                   for _ in range(world))
    w = Workload(kernel="moe_dispatch_gemm", m=tokens * world, n=width, k=hidden, experts=experts, topk=topk,
                 routes=routes)
    return w, routes, experts, tokens, hidden, width


def _moe_oracle(xw, grads, rows_of, rank: int):
    leaves = [[t.clone().requires_grad_() for t in pair] for pair in xw]
    gathered = torch.cat([p[0] for p in leaves])
    loss = 0
    for (_, w), g, rows in zip(leaves, grads, rows_of):
        h, o = rows.hidden, rows.offsets
        outs = [gathered[rows.src[o[e]:o[e + 1]]] @ w[e * h:(e + 1) * h] for e in range(len(o) - 1)]
        y = torch.zeros(rows.rows, w.shape[1], dtype=F64).index_copy(0, rows.dst, torch.cat(outs))
        loss = loss + (y * g).sum()
    loss.backward()
    return [t.grad for t in leaves[rank]]


def _moe_errors(rank: int, world: int) -> dict:
    import mkernel
    from mkernel.hw import fallbacks as f

    w, routes, experts, tokens, hidden, width = _moe_case(world)
    rows_of = [f.moe_rows(f.moe_sources(w, r, 1, world), tokens, hidden, experts // world, "cpu")
               for r in range(world)]
    xw = [_draw(r, (tokens, hidden), (experts // world * hidden, width)) for r in range(world)]
    grads = [_draw(200 + r, (rows_of[r].rows, width))[0] for r in range(world)]
    want = _moe_oracle(xw, grads, rows_of, rank)
    handle = mkernel.moe_plan(torch.tensor(routes[rank]), experts, hidden, width)
    paths = {"fallback": lambda x, wt: f.fallback_moe(x, wt, rows_of[rank]),
             "api": lambda x, wt: mkernel.moe_dispatch_gemm(x, wt, handle),
             "fused-op": lambda x, wt: torch.ops.mkernel.moe_dispatch_gemm(x, wt, handle.id)}
    return {f"moe {p}": max(map(_rel, grads_of(fn, xw[rank], [grads[rank]]), want)) for p, fn in paths.items()}


def _grad_errors(rank: int, world: int) -> dict:
    """Every op's every path: max relative error of its gradients against the oracle's."""
    torch.set_num_threads(1)  # tiny ops: a second intra-op thread only waits (100x slower on a loaded machine)
    stand_in_kernels()
    errors = {}
    for op in ("gemm_ar", "gemm_rs", "ag_gemm"):
        ab, grads = _gemm_case(op, rank, world)
        want = _gemm_oracle(op, ab, grads, rank, world)
        for path, fn in _gemm_paths(op).items():
            errors[f"{op} {path}"] = max(map(_rel, grads_of(fn, ab[rank], [grads[rank]]), want))
    for causal, s in ((False, 5), (True, 6)):
        qkv = [_draw(r, *[(B, H, s, D)] * 3) for r in range(world)]
        cot = [_draw(300 + r, (B, H, s, D), (B, H, s)) for r in range(world)]
        want = _attention_oracle(qkv, cot, rank, world, causal)
        for path, fn in _attention_paths(causal).items():
            errors[f"attention causal={causal} {path}"] = max(map(_rel, grads_of(fn, qkv[rank], cot[rank]), want))
    errors.update(_moe_errors(rank, world))
    return errors


def _train_runs(world: int) -> dict:
    from harness import training

    runs = {f"{kind} float64": training.train(kind, tokens=8 * world) for kind in training.KINDS}
    runs["mlp float32"] = training.train("mlp", tokens=8 * world, dtype=torch.float32)
    if world == 2:  # static shapes: the path rule reads sizes as constants, which dynamic sizes are not
        for kind in ("mlp", "mlp-ar", "attention-causal"):
            runs[f"{kind} compiled"] = training.train(kind, tokens=16, compile_backend="aot_eager")
    return runs


def _checks(rank: int, world: int) -> dict:
    torch.set_num_threads(1)  # tiny ops: a second intra-op thread only waits (100x slower on a loaded machine)
    return {"grads": _grad_errors(rank, world), "runs": _train_runs(world)}


@functools.cache
def _results(world: int) -> list[dict]:
    """Every rank's checks, one spawn per world (starting 4 ranks costs about 30 s here)."""
    return [out for _, out in ranks(world, _checks)]


def _check(world: int, prefix: str, bound: float) -> None:
    for rank, out in enumerate(_results(world)):
        mine = {k: v for k, v in out["grads"].items() if k.startswith(prefix)}
        assert mine, f"rank {rank}: no {prefix} paths ran"
        bad = {k: v for k, v in mine.items() if not v <= bound}
        assert not bad, f"rank {rank} of {world}: gradients off the oracle's by more than {bound}: {bad}"


WORLDS = [1, 2, 4]


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("op", ["gemm_ar", "gemm_rs", "ag_gemm"])
def test_gemm_backward_matches_the_float64_oracle_on_every_path(op, world):
    """ag_gemm's grad of a is a reduce-scatter (gemm_rs), gemm_rs's an all-gather (ag_gemm),
    gemm_ar's local; grad of b re-gathers A (ag_gemm) or gathers grad (gemm_rs)."""
    _check(world, f"{op} ", EXACT)


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("causal", [False, True])
def test_ring_attention_backward_matches_the_oracle_with_lse_gradients(causal, world):
    """Both outputs carry a gradient: lse's must reach q and k (the zigzag merge needs it too)."""
    _check(world, f"attention causal={causal} ", ATTENTION)


@pytest.mark.parametrize("world", WORLDS)
def test_moe_backward_combines_x_gradients_back_to_each_tokens_rank(world):
    _check(world, "moe ", EXACT)


def _train_bound(name: str) -> float:
    return TRAIN["attention" if "attention" in name else "float32" if "float32" in name else "float64"]


@pytest.mark.parametrize("world", WORLDS)
def test_tp_training_matches_the_torch_model_step_by_step(world):
    from harness import training

    for rank, out in enumerate(_results(world)):
        for name, run in out["runs"].items():
            err, bound = training.curve_error(run), _train_bound(name)
            assert len(run["tp"]) == 20 and err <= bound, f"rank {rank} of {world}, {name}: loss off by {err}"
            assert run["weights"] <= 10 * bound, f"rank {rank} of {world}, {name}: weights off by {run['weights']}"
            assert run["torch"][-1] < 0.9 * run["torch"][0], f"{name}: the model did not train: {run['torch']}"


def test_compiled_tp_models_ran_at_world_2():
    assert {"mlp compiled", "mlp-ar compiled", "attention-causal compiled"} <= set(_results(2)[0]["runs"])
