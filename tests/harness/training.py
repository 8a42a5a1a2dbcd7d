"""Training runs of tensor-parallel models against the same models written with torch only, and
the GPU checks of the ops' backward (run by tests/hw/test_train.py through :func:`emulate.launch`),
each returning what it measured for the tests to judge.

A run (:func:`train`): the torch-only model and its TP twin start from the same weights and see
the same data; every step is forward, loss, backward and an SGD step on both, and the loss of
each is recorded (the TP model's summed over ranks where each rank's covers its own tokens).
Models:

- ``mlp``: :class:`~mkernel.hw.tp.ParallelMLP` (``ag_gemm``, GELU, ``gemm_rs``) on this rank's
  tokens against ``fc2(gelu(fc1(x)))`` on all of them; ``mlp-ar``: the same with ``gemm_ar``
  (every rank gets every token's output and computes the whole loss);
- ``attention`` / ``attention-causal``: a block ``h = x + attn(x) Wo``, ``h + mlp(h)``, its sequence
  split over the ranks (zigzag chunks when causal): ``ring_attention`` over every rank's keys,
  the projections replicated (gradients summed over ranks), the MLP tensor-parallel on the same
  tokens; against the block on the whole sequence with ``scaled_dot_product_attention``.
"""
from __future__ import annotations

import torch

from mkernel.errors import InputError

from mkernel.hw import api
from mkernel.hw.collectives import plain_all_reduce, replicate
from mkernel.hw.groups import group_info
from mkernel.hw.tp import ParallelMLP
from mkernel.reference import BF16_LOOSE_RTOL

from .rank import _device_error

KINDS = ("mlp", "mlp-ar", "attention", "attention-causal")
BF16_TOLERANCE = BF16_LOOSE_RTOL  # relative loss difference per step: bf16 weights, activations, collectives


def _seeded(seed: int, *shapes: tuple[int, int]) -> list[torch.nn.Linear]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return [torch.nn.Linear(i, o, bias=b) for i, o, b in shapes]


class Mlp(torch.nn.Module):
    """``fc2(gelu(fc1(x)))``: the torch-only model."""

    def __init__(self, hidden: int, ffn: int, seed: int = 0):
        super().__init__()
        self.fc1, self.fc2 = _seeded(seed, (hidden, ffn, True), (ffn, hidden, True))

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


def _heads(t: torch.Tensor, heads: int) -> torch.Tensor:
    """[S, heads * D] -> [1, heads, S, D], contiguous (the fused kernel's layout)."""
    s = t.shape[0]
    return t.view(s, heads, -1).transpose(0, 1).unsqueeze(0).contiguous()


def _tokens(a: torch.Tensor) -> torch.Tensor:
    return a[0].transpose(0, 1).reshape(a.shape[2], -1)


class AttentionBlock(torch.nn.Module):
    """``h = x + attention(x Wq, x Wk, x Wv) Wo``, then ``h + mlp(h)``, on the whole sequence."""

    def __init__(self, hidden: int, heads: int, ffn: int, causal: bool, seed: int = 0):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.q, self.k, self.v, self.o = _seeded(seed, *[(hidden, hidden, False)] * 4)
        self.mlp = Mlp(hidden, ffn, seed + 1)

    def forward(self, x):
        q, k, v = (_heads(p(x), self.heads) for p in (self.q, self.k, self.v))
        h = x + self.o(_tokens(torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=self.causal)))
        return h + self.mlp(h)


class TpAttentionBlock(torch.nn.Module):
    """:class:`AttentionBlock` on this rank's share of the sequence (:func:`token_rows`)."""

    def __init__(self, ref: AttentionBlock, group=None, **knobs):
        super().__init__()
        self.group = group_info(group).name or None
        self.heads, self.causal, self.knobs = ref.heads, ref.causal, knobs
        self.wq, self.wk, self.wv, self.wo = (torch.nn.Parameter(p.weight.detach().t().contiguous())
                                              for p in (ref.q, ref.k, ref.v, ref.o))
        self.mlp = ParallelMLP.from_mlp(ref.mlp.fc1, ref.mlp.fc2, group, **knobs)

    def forward(self, x):
        q, k, v = (_heads(x @ replicate(w, self.group), self.heads) for w in (self.wq, self.wk, self.wv))
        a, _ = api.ring_attention(q, k, v, self.group, causal=self.causal, **self.knobs)
        h = x + _tokens(a) @ replicate(self.wo, self.group)
        return h + self.mlp(h)


def token_rows(kind: str, rank: int, world: int, tokens: int) -> torch.Tensor:
    """This rank's rows of the whole sequence: a block of tokens / world, or (causal attention)
    the zigzag chunks rank and 2 world - 1 - rank of tokens / (2 world) each."""
    if kind != "attention-causal":
        n = tokens // world
        return torch.arange(rank * n, (rank + 1) * n)
    n = tokens // (2 * world)
    return torch.cat([torch.arange(c * n, (c + 1) * n) for c in (rank, 2 * world - 1 - rank)])


def models(kind: str, hidden: int, ffn: int, heads: int, dtype, device, **knobs):
    """(the torch-only model, its TP twin on this rank) with the same weights."""
    if kind not in KINDS:
        raise InputError(f"kind {kind!r} is not one of {', '.join(KINDS)}")
    if kind.startswith("mlp"):
        ref = Mlp(hidden, ffn).to(device, dtype)
        tp = ParallelMLP.from_mlp(ref.fc1, ref.fc2, reduce="all" if kind == "mlp-ar" else "scatter", **knobs)
    else:
        ref = AttentionBlock(hidden, heads, ffn, causal=kind == "attention-causal").to(device, dtype)
        tp = TpAttentionBlock(ref, **knobs)
    return ref, tp


def _pairs(kind: str, ref, tp) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(TP parameter, the torch model's same values) for every TP parameter."""
    mlp_ref, mlp_tp = (ref, tp) if kind.startswith("mlp") else (ref.mlp, tp.mlp)
    pairs = [(layer.weight, want[0]) for layer, want in ((mlp_tp.fc1, mlp_tp.fc1.shard(mlp_ref.fc1)),
                                                          (mlp_tp.fc2, mlp_tp.fc2.shard(mlp_ref.fc2)))]
    pairs += [(mlp_tp.fc1.bias, mlp_tp.fc1.shard(mlp_ref.fc1)[1]), (mlp_tp.fc2.bias, mlp_tp.fc2.shard(mlp_ref.fc2)[1])]
    if not kind.startswith("mlp"):
        pairs += [(w, p.weight.t()) for w, p in ((tp.wq, ref.q), (tp.wk, ref.k), (tp.wv, ref.v), (tp.wo, ref.o))]
    return pairs


def _sse(out: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    return ((out.float() if out.dtype in (torch.bfloat16, torch.float16) else out) - want.to(out.dtype)).pow(2).sum()


def train(kind: str, *, steps: int = 20, tokens: int = 24, hidden: int = 8, ffn: int = 16, heads: int = 2,
          dtype=torch.float64, device="cpu", lr: float = 0.2, seed: int = 0, compile_backend: str | None = None,
          **knobs) -> dict:
    """``steps`` SGD steps of the torch-only model and its TP twin (``knobs``: group, mode,
    gpus_per_node, sms; ``compile_backend``: the TP model under torch.compile with it): their
    losses per step, and the largest relative difference of a TP parameter from the torch
    model's after the last step."""
    g = group_info(knobs.get("group"))
    gen = torch.Generator().manual_seed(seed)
    x, y = (torch.randn(tokens, hidden, generator=gen).to(device, dtype) for _ in range(2))
    ref, tp = models(kind, hidden, ffn, heads, dtype, device, **knobs)
    rows = token_rows(kind, g.rank, g.world, tokens).to(device)
    x_mine, y_mine = x.index_select(0, rows).contiguous(), y.index_select(0, rows)
    opts = [torch.optim.SGD(m.parameters(), lr=lr) for m in (ref, tp)]
    run = tp if compile_backend is None else torch.compile(tp, backend=compile_backend, fullgraph=True, dynamic=False)
    curves: dict[str, list[float]] = {"torch": [], "tp": []}
    for _ in range(steps):
        loss_ref = _sse(ref(x), y) / y.numel()
        if kind == "mlp-ar":  # every rank holds every token's output: each computes the whole loss
            loss_tp = _sse(run(x_mine), y) / y.numel()
            whole = loss_tp.detach()
        else:  # each rank's loss covers its tokens; the model's loss is their sum
            loss_tp = _sse(run(x_mine), y_mine) / y.numel()
            whole = plain_all_reduce(loss_tp.detach().clone(), g)
        for opt, loss in zip(opts, (loss_ref, loss_tp)):
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        curves["torch"].append(float(loss_ref.detach()))
        curves["tp"].append(float(whole))
    with torch.no_grad():
        weights = max(float((p.double() - want.double()).norm() / want.double().norm())
                      for p, want in _pairs(kind, ref, tp))
    return {**curves, "weights": weights}


def curve_error(run: dict) -> float:
    """The largest relative difference of the TP loss from the torch loss over the steps."""
    return max(abs(a - b) / abs(b) for a, b in zip(run["tp"], run["torch"]))


# ---- the GPU checks (a rank each, spawned by emulate.launch) ----

GPU_SIZES = {"tokens": 256, "hidden": 128, "ffn": 512, "heads": 2}  # D = 64; zigzag chunks of 32 rows on 4 ranks


def _knobs(info, gpus_per_node: int, mode: str) -> dict:
    return {"gpus_per_node": gpus_per_node, "sms": info.sm_budget, "mode": mode}


def grads_of(fn, inputs, cotangents, dtype=torch.float64) -> list[torch.Tensor]:
    """Gradients of sum(<output_i, cotangent_i>) with the inputs cast to ``dtype``."""
    leaves = [t.detach().to(dtype).requires_grad_() for t in inputs]
    outs = fn(*leaves)
    outs = outs if isinstance(outs, tuple) else (outs,)
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    sum((o.to(acc) * c.to(acc)).sum() for o, c in zip(outs, cotangents)).backward()
    return [t.grad for t in leaves]


def grads_rank(info, gpus_per_node: int, seed: int = 0) -> dict:
    """Every op's gradients on the fused path (bf16, ``mode="fused"``: its backward's dual ops
    fused too) against the torch path's in float64 on the same inputs, odd shapes."""
    world = info.world
    gen = torch.Generator(device="cuda").manual_seed(seed * 1000 + info.rank)
    shared = torch.Generator(device="cuda").manual_seed(seed * 1000 + 999)  # gemm_ar's gradient is replicated

    def rnd(*shape, g=gen, dtype=torch.bfloat16):
        return torch.randn(*shape, device="cuda", dtype=dtype, generator=g)

    kw = {"gpus_per_node": gpus_per_node, "sms": info.sm_budget}
    cases = {"gemm_ar": (api.gemm_ar, [rnd(300, 72), rnd(72, 520)], [rnd(300, 520, g=shared)]),
             "gemm_rs": (api.gemm_rs, [rnd(80 * world, 72), rnd(72, 520)], [rnd(80, 520)]),
             "ag_gemm": (api.ag_gemm, [rnd(100, 40), rnd(40, 264)], [rnd(100 * world, 264)])}
    for causal in (False, True):
        def attention(q, k, v, mode, causal=causal, **kw):
            return api.ring_attention(q, k, v, causal=causal, mode=mode, **kw)
        cases[f"ring_attention causal={causal}"] = (attention, [rnd(2, 3, 200, 64) for _ in range(3)],
                                                    [rnd(2, 3, 200, 64), rnd(2, 3, 200, dtype=torch.float32)])
    experts, topk, tokens, hidden, width = 8, 2, 64, 136, 264
    idx = torch.stack([torch.randperm(experts, device="cuda", generator=gen)[:topk] for _ in range(tokens)])
    handle = api.moe_plan(idx, experts, hidden, width, mode="fused", **kw)
    moe_inputs = [rnd(tokens, hidden), (rnd(experts // world * hidden, width).float() / hidden ** 0.5).bfloat16()]
    errors, nan = {}, 0
    for name, (fn, inputs, cots) in cases.items():
        fused = grads_of(lambda *t: fn(*t, mode="fused", **kw), inputs, cots, torch.bfloat16)
        want = grads_of(lambda *t: fn(*t, mode="fallback", **kw), inputs, cots)
        nan += sum(int(t.isnan().sum()) for t in fused)
        errors[name] = max(float((a.double() - b).norm() / b.norm()) for a, b in zip(fused, want))
    cot = [rnd(handle.rows, width)]
    fused = grads_of(lambda x, w: api.moe_dispatch_gemm(x, w, handle), moe_inputs, cot, torch.bfloat16)
    from mkernel.hw.fallbacks import fallback_moe

    want = grads_of(lambda x, w: fallback_moe(x, w, handle.torch_rows, handle.group_name or None), moe_inputs, cot)
    errors["moe_dispatch_gemm"] = max(float((a.double() - b).norm() / b.norm()) for a, b in zip(fused, want))
    failure = _device_error(api)
    return {"rank": info.rank, "errors": errors, "nan": nan, "device_error": failure}


BARRIER_TIMEOUT_S = 120  # a rank that waits this long for a peer at a call's start fails, naming the flag


def train_rank(info, gpus_per_node: int, modes: tuple[str, ...] = ("auto", "fused"), kinds: tuple[str, ...] = KINDS,
               steps: int = 20) -> dict:
    """20 bf16 steps of every model kind on every mode against the torch-only model (run on every
    rank on the whole data): per run the largest relative loss difference over the steps. The call
    barrier's bound is BARRIER_TIMEOUT_S, not the default five minutes: a run whose ranks fall out of
    step fails with the rank, flag and epoch inside a device call's limit instead of outliving it."""
    from mkernel.hw.knobs import HwKnobs

    api.configure(HwKnobs(barrier_timeout_s=BARRIER_TIMEOUT_S))
    runs = {}
    for kind in kinds:
        for mode in modes:
            run = train(kind, steps=steps, dtype=torch.bfloat16, device="cuda", lr=0.2,
                        **GPU_SIZES, **_knobs(info, gpus_per_node, mode))
            runs[f"{kind} {mode}"] = {"error": curve_error(run), "torch": run["torch"], "tp": run["tp"],
                                      "weights": run["weights"], "trains": run["torch"][-1] < run["torch"][0]}
    failure = _device_error(api)
    return {"rank": info.rank, "runs": {k: {"error": v["error"], "weights": v["weights"]} for k, v in runs.items()},
            "curves": runs, "device_error": failure}


def _step(model, opt, x, y):
    loss = _sse(model(x), y) / y.numel()
    loss.backward()
    opt.step()
    return loss


def replay_rank(info, gpus_per_node: int, mode: str, how: str = "graph", steps: int = 4) -> dict:
    """The TP MLP's training step (forward, backward, SGD) captured in a CUDA graph (``how="graph"``)
    or under ``torch.compile(fullgraph=True, dynamic=False)`` (``how="compile"``), against the same
    steps in eager mode from the same weights, on fresh data each step: per-step relative loss
    difference. Ranks on GPUs of their own run the TP model on an NCCL group: emulate.launch's
    group is gloo, whose host collectives a CUDA graph cannot capture."""
    import copy

    import torch.distributed as dist

    s = GPU_SIZES
    group = dist.new_group(backend="nccl") if info.world > 1 and not info.emulated else None
    _, tp = models("mlp", s["hidden"], s["ffn"], s["heads"], torch.bfloat16, "cuda", group=group,
                   **_knobs(info, gpus_per_node, mode))
    gen = torch.Generator(device="cuda").manual_seed(7 + info.rank)
    data = [[torch.randn(s["tokens"] // info.world, s["hidden"], device="cuda", dtype=torch.bfloat16, generator=gen)
             for _ in range(2)] for _ in range(steps + 3)]
    opt = torch.optim.SGD(tp.parameters(), lr=0.2)
    run = torch.compile(tp, fullgraph=True, dynamic=False) if how == "compile" else tp
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up: every executor built, forward and backward (collective)
        for x, y in data[:3]:
            opt.zero_grad(set_to_none=True)
            _step(run, opt, x, y)
    torch.cuda.current_stream().wait_stream(side)
    eager = copy.deepcopy(tp)
    eager_opt = torch.optim.SGD(eager.parameters(), lr=0.2)
    if how == "graph":
        static_x, static_y = (t.clone() for t in data[3])
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            static_loss = _step(tp, opt, static_x, static_y)
    errors = []
    for x, y in data[3:]:
        if how == "graph":
            static_x.copy_(x)
            static_y.copy_(y)
            graph.replay()
            got = float(static_loss)
        else:
            opt.zero_grad(set_to_none=True)
            got = float(_step(run, opt, x, y).detach())
        eager_opt.zero_grad(set_to_none=True)
        want = float(_step(eager, eager_opt, x, y).detach())
        errors.append(abs(got - want) / abs(want))
    failure = _device_error(api)
    return {"rank": info.rank, "errors": errors, "device_error": failure}
