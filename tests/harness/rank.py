"""The GPU tests' rank functions (run in every rank process through
:func:`mkernel.hw.runtime.emulate.launch`): each builds the same schedule as every other rank (for
the SMs it may use), draws fresh seeded inputs of every rank (so each rank can compute the float64
oracle without communication), rounds them to bf16, runs the fused kernel into outputs poisoned with
NaN, and returns what it measured against the oracle: relative errors, elements left unwritten,
epochs, messages. The tests judge those values (:data:`TOLERANCE`); nothing here passes or fails.
"""
from __future__ import annotations

import time

import numpy as np

from mkernel import builders, reference
from mkernel.cluster import Cluster
from mkernel.errors import InputError, MkernelError
from mkernel.hw.knobs import HwKnobs
from mkernel.hw.rank import _timed, cluster_for
from mkernel.hw.runtime.emulate import RankInfo
from mkernel.problems import Workload

TOLERANCE = reference.BF16_RTOL  # the fused tests' criterion against the float64 oracle


def _draw(info: RankInfo, w: Workload, c: Cluster, seed: int) -> tuple[dict, dict]:
    """This rank's seeded inputs rounded to bf16 on its GPU, and every rank's float64 oracle of the
    rounded inputs (each rank draws all ranks' inputs, so nobody communicates)."""
    import torch

    arrays = builders.get(w.kernel).make_inputs(w, c, np.random.default_rng(seed))
    dev = torch.device("cuda", torch.cuda.current_device())
    ranked = {name: [torch.from_numpy(a).to(dev).bfloat16() for a in per] for name, per in arrays.items()}
    rounded = {name: [t.float().cpu().numpy() for t in per] for name, per in ranked.items()}
    inputs = {name: per[info.rank].contiguous() for name, per in ranked.items()}
    return inputs, reference.expected(w, rounded, c.gpus_per_node)


def _case(info: RankInfo, w: Workload, c: Cluster, seed: int):
    """The schedule, and :func:`_draw`'s inputs and oracle for ``seed``."""
    return (builders.get(w.kernel).build(w, c), *_draw(info, w, c, seed))


def run_rank(info: RankInfo, w: Workload, nodes: int, gpus_per_node: int, seed: int = 0, calls: int = 3,
             timed: int = 0, timeout_s: float = 5.0, transport: str = "loopback", shaping=None,
             controller=None, faults=None, heap: str = "device", net=None, data_path: str = "auto",
             barrier_s: float = 30.0) -> dict:
    """``calls`` calls, each on fresh inputs into poisoned outputs and each checked against the
    oracle (the result holds the worst error per output): a kernel that read the previous call's
    data would pass on repeated inputs. With a ``controller`` (a
    :class:`mkernel.controller.Balance`), the adaptive SM partition, and the result has the last
    call's target trajectory. ``faults``: what the proxy injects (:class:`mkernel.hw.runtime.proxy.ProxyFaults`);
    ``transport``, ``shaping``, ``heap``, ``net``: the Context's; ``data_path``: the fused kernel's copy
    steps' (:class:`~mkernel.hw.knobs.HwKnobs`). ``timeout_s`` bounds every wait but the call barrier's,
    ``barrier_s``: ranks enter their first call apart by however long each takes to load its kernel
    (over 2 s seen, 2026-12-05), which the product's barrier bound (300 s) allows for and a data
    wait's need not."""
    from mkernel.hw.runtime.context import Context
    from mkernel.hw.runtime.executor import Executor

    if calls < 1:
        raise InputError(f"run_rank: calls={calls}; at least one call is checked")
    c = cluster_for(info, nodes, gpus_per_node)
    schedule = builders.get(w.kernel).build(w, c)
    sizes = Executor.context_sizes(schedule)
    knobs = HwKnobs(timeout_s=timeout_s, barrier_timeout_s=barrier_s, data_path=data_path)
    with Context(None, gpus_per_node=gpus_per_node, send_bytes=0, transport=transport, shaping=shaping, faults=faults,
                 knobs=knobs, heap=heap, net=net, **sizes) as ctx:
        op = Executor(schedule, ctx, controller=controller, cluster=c)
        errors, unwritten = {}, {}
        for call in range(calls):  # fresh inputs every call: a stale read of the last call's data shows
            inputs, expected = _draw(info, w, c, seed * 100_003 + call)
            launched = time.time()
            try:
                outs = op(inputs, poison=True)
                op.check()
            except MkernelError as exc:  # when each rank launched shows the skew a call barrier waited out
                raise type(exc)(f"{exc} [call {call + 1} launched at {launched:.3f}, failed at {time.time():.3f} "
                                f"(wall clock; timeout {timeout_s} s)]") from exc
            for name, refs in expected.items():
                got = outs[name].float().cpu().numpy().astype(np.float64)
                unwritten[name] = unwritten.get(name, 0) + int(np.isnan(got).sum())
                errors[name] = max(errors.get(name, 0.0), reference.relative_error(got, refs[info.rank]))
        times = _timed(lambda: op(inputs, outs), timed)
        if timed:
            op.check()
        return {"rank": info.rank, "errors": errors, "unwritten": unwritten, "epoch": int(op.epoch.item()),
                "grid": op.plan.grid, "blocks": op.plan.blocks, "sm_budget": info.sm_budget,
                "trajectory": op.trajectory() if controller is not None else None,
                "time_s": float(np.median(times)) if times else None, "times_s": times}


def unchecked_rank(info: RankInfo, w: Workload, nodes: int, gpus_per_node: int, faults,
                   calls: int = 3) -> tuple[int, str] | None:
    """Calls under a fatal proxy fault, with no :meth:`check` between them, each after the GPU has
    finished the last: the first call fails on every rank, so the second must raise. Returns (which
    call raised, 1-based; its message), or None if none did."""
    import torch

    from mkernel.hw.runtime.context import Context
    from mkernel.hw.runtime.executor import Executor

    c = cluster_for(info, nodes, gpus_per_node)
    schedule = builders.get(w.kernel).build(w, c)
    inputs, _ = _draw(info, w, c, 0)
    ctx = Context(None, gpus_per_node=gpus_per_node, send_bytes=0, knobs=HwKnobs(timeout_s=2.0, barrier_timeout_s=2.0),
                  faults=faults,
                  **Executor.context_sizes(schedule))
    raised = None
    try:
        op = Executor(schedule, ctx)
        for call in range(1, calls + 1):
            try:
                op(inputs)
            except MkernelError as exc:
                raised = (call, str(exc))
                break
            torch.cuda.current_stream().synchronize()
    finally:
        try:
            ctx.close()  # stopping the proxy raises its failure again: reported above (or too late)
        except MkernelError:
            pass
    return raised


def epoch_top_rank(info: RankInfo, w: Workload, nodes: int, gpus_per_node: int, calls: int = 2) -> dict:
    """The top of the epoch range: one call, then every rank fast-forwards to ``calls`` before the
    last epoch (flag targets near 2^63), runs those calls on fresh inputs, each checked, and the
    call after the last epoch must be refused before launch (its message)."""
    import torch.distributed as dist

    from mkernel.hw.runtime.context import Context
    from mkernel.hw.runtime.executor import Executor

    c = cluster_for(info, nodes, gpus_per_node)
    schedule = builders.get(w.kernel).build(w, c)
    with Context(None, gpus_per_node=gpus_per_node, send_bytes=0, **Executor.context_sizes(schedule)) as ctx:
        op = Executor(schedule, ctx)
        op(_draw(info, w, c, 1)[0])
        op.check()
        last = op.plan.last_epoch
        dist.barrier()
        op.fast_forward(last - calls)
        dist.barrier()
        errors: dict[str, float] = {}
        for call in range(calls):
            inputs, expected = _draw(info, w, c, 2 + call)
            outs = op(inputs, poison=True)
            op.check()
            for name, refs in expected.items():
                got = outs[name].float().cpu().numpy().astype(np.float64)
                errors[name] = max(errors.get(name, 0.0), reference.relative_error(got, refs[info.rank]))
        epoch = int(op.epoch.item())
        try:
            op(inputs)
            refused = None
        except MkernelError as exc:
            refused = str(exc)
    return {"rank": info.rank, "last_epoch": last, "epoch": epoch, "errors": errors, "refused": refused}


def graph_rank(info: RankInfo, evictions: int = 24, seed: int = 0) -> dict:
    """One call captured in a CUDA graph, then ``evictions`` calls with fresh output tensors (more
    address tables than the executor caches), then the graph replayed into a poisoned output: the
    replay must still read valid addresses and write the right answer."""
    import torch

    from mkernel.hw.runtime.context import Context
    from mkernel.hw.runtime.executor import Executor

    w = Workload(kernel="gemm_ar", m=300, n=520, k=72)
    schedule, inputs, expected = _case(info, w, cluster_for(info, 1, 1), seed)
    with Context(None, gpus_per_node=1, send_bytes=0, **Executor.context_sizes(schedule)) as ctx:
        op = Executor(schedule, ctx)
        out = {"OUT": torch.empty(w.m, w.n, dtype=torch.bfloat16, device="cuda")}
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            op(inputs, out)  # warm-up outside the capture
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            op(inputs, out)
        others = [op(inputs)["OUT"] for _ in range(evictions)]  # kept alive: every call a new address
        out["OUT"].fill_(float("nan"))
        graph.replay()
        op.check()
        got = out["OUT"].float().cpu().numpy().astype(np.float64)
        err = reference.relative_error(got, expected["OUT"][0])
        other_err = max(reference.relative_error(o.float().cpu().numpy().astype(np.float64), expected["OUT"][0])
                        for o in others)
        return {"error": err, "others_error": other_err, "unwritten": int(np.isnan(got).sum()),
                "epoch": int(op.epoch.item())}


def api_rank(info: RankInfo, gpus_per_node: int, seed: int = 0, calls: int = 3,
             ops: tuple[str, ...] = ("gemm_ar", "gemm_rs", "ag_gemm", "ring_attention")) -> dict:
    """The PyTorch ops (``ops`` of them) against their fallbacks on odd shapes, fresh inputs per
    call; and, at world 1, ``torch.compile(fullgraph=True)`` tracing every op through its fake
    implementation."""
    import torch

    from mkernel.hw import api

    world = info.world
    g = torch.Generator(device="cuda").manual_seed(seed * 1000 + info.rank)
    from mkernel.hw import fallbacks as refs

    # the fused path (auto would take torch's at world 1); emulated ranks share the GPU's SMs
    kw = {"gpus_per_node": gpus_per_node, "sms": info.sm_budget, "mode": "fused"}

    def rnd(*shape):
        return torch.randn(*shape, device="cuda", dtype=torch.bfloat16, generator=g)

    def rel(x, y):
        return ((x.float() - y.float()).norm() / y.float().norm()).item()

    errors: dict[str, float] = {}
    nan = 0
    for _ in range(calls):
        cases = {}
        a, b = rnd(300, 72), rnd(72, 520)
        if "gemm_ar" in ops:
            cases["gemm_ar"] = (api.gemm_ar(a, b, **kw), refs.reference_gemm_ar(a, b))
        a = rnd(80 * world, 72)
        if "gemm_rs" in ops:
            cases["gemm_rs"] = (api.gemm_rs(a, b, **kw), refs.reference_gemm_rs(a, b))
        a, b2 = rnd(100, 40), rnd(40, 264)
        if "ag_gemm" in ops:
            cases["ag_gemm"] = (api.ag_gemm(a, b2, **kw), refs.reference_ag_gemm(a, b2))
        q, k, v = (rnd(2, 3, 200, 64) for _ in range(3))
        for causal in (False, True) if "ring_attention" in ops else ():
            out, lse = api.ring_attention(q, k, v, causal=causal, **kw)
            want, ref_lse = refs.reference_ring_attention(q, k, v, causal=causal)
            cases[f"ring_attention{'_causal' if causal else ''}"] = (out, want)
            cases[f"ring_attention{'_causal' if causal else ''}_lse"] = (lse, ref_lse)
        for name, (got, ref) in cases.items():
            nan += int(got.isnan().sum().item())
            errors[name] = max(errors.get(name, 0.0), rel(got, ref))
    traced = None
    if world == 1:
        def f(a, b, q):
            x = api.gemm_ar(a, b, mode="fused") + api.gemm_rs(a, b, mode="fused") + api.ag_gemm(a, b, mode="fused")
            o, lse = api.ring_attention(q, q, q, mode="fused")
            return x.float().sum() + o.float().sum() + lse.sum()

        a, b, q = rnd(256, 64), rnd(64, 256), rnd(1, 2, 128, 64)
        compiled = torch.compile(f, backend="eager", fullgraph=True)
        traced = rel(compiled(a, b, q).reshape(1), f(a, b, q).reshape(1))
    failure = _device_error(api)
    return {"rank": info.rank, "errors": errors, "nan": nan, "traced_rel_err": traced, "device_error": failure}


def _device_error(api) -> str | None:
    """The first device, proxy or wait error of the torch ops' executors (none: None), then close them."""
    try:
        api.check()
    except MkernelError as exc:
        return str(exc)
    finally:
        api.close()
    return None


def moe_api_rank(info: RankInfo, gpus_per_node: int, seed: int = 0, calls: int = 3) -> dict:
    """The MoE torch op on a given random routing (with weights) against its fallback."""
    import torch

    from mkernel.hw import api

    experts, topk, tokens, hidden, width = 8, 2, 64, 136, 264
    g = torch.Generator(device="cuda").manual_seed(seed * 1000 + info.rank)
    idx = torch.stack([torch.randperm(experts, device="cuda", generator=g)[:topk] for _ in range(tokens)])
    weights = torch.rand(tokens, topk, device="cuda", generator=g).softmax(-1)
    from mkernel.hw.fallbacks import reference_moe

    h = api.moe_plan(idx, experts, hidden, width, topk_weights=weights, gpus_per_node=gpus_per_node,
                     sms=info.sm_budget, mode="fused")
    real = h.sources[:, 0] >= 0
    errors, nan, wrong = [], 0, []
    for _ in range(calls):
        x = torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16, generator=g)
        w = (torch.randn(experts // info.world * hidden, width, device="cuda", generator=g) / hidden ** 0.5).bfloat16()
        y = api.moe_dispatch_gemm(x, w, h).float()
        ref = reference_moe(x, w, h.torch_rows).float()
        nan += int(y.isnan().sum().item())
        errors.append(((y - ref).norm() / ref.norm()).item())
        bad = (y - ref).norm(dim=1) > TOLERANCE * ref.norm(dim=1).clamp_min(1e-6)  # wrong rows, by source rank
        sources = h.sources[:, 0][bad].tolist()
        wrong.append({r: sources.count(r) for r in sorted(set(sources))})
    weights_ok = bool((h.row_weights[real] > 0).all().item() and (h.row_weights[~real] == 0).all().item())
    failure = _device_error(api)
    return {"rank": info.rank, "errors": errors, "nan": nan, "rows": h.rows, "weights_ok": weights_ok, "wrong": wrong,
            "device_error": failure}


def bad_input_rank(info: RankInfo) -> dict:
    """Every bad argument the torch ops must refuse before any launch, with the message each gave."""
    import torch

    from mkernel.hw import api
    from mkernel.hw.runtime.context import Context
    from mkernel.hw.runtime.executor import Executor

    bf = dict(device="cuda", dtype=torch.bfloat16)
    a, b = torch.randn(64, 32, **bf), torch.randn(32, 64, **bf)
    q = torch.randn(1, 2, 64, 32, **bf)
    world = info.world
    torch.manual_seed(info.rank)
    routes = torch.stack([torch.randperm(2 * world)[:2] for _ in range(64)]).cuda()  # distinct experts per token
    moe = api.moe_plan(routes, experts=2 * world, hidden=32, width=64, mode="fused")
    x, w = torch.randn(64, 32, **bf), torch.randn(2 * 32, 64, **bf)
    problem = Workload(kernel="gemm_ar", m=256, n=256, k=64)
    gemm = builders.get("gemm_ar").build(problem, Cluster("t", 1, world))
    twice = builders.get("gemm_ar").build(problem, Cluster("t", 1, 2 * world))
    sizes = Executor.context_sizes(gemm)

    def executor(schedule, second=False, **shrink):
        with Context(None, gpus_per_node=world, send_bytes=0, **{**sizes, **shrink}) as ctx:
            Executor(schedule, ctx)
            if second:
                Executor(schedule, ctx)
    fused = {"mode": "fused"}  # the fused kernel's refusals (auto takes the torch path on these)
    cases = {
        "wrong dtype": lambda: api.gemm_ar(a.float(), b, **fused),
        "wrong device": lambda: api.gemm_ar(a.cpu(), b.cpu(), **fused),
        "not contiguous": lambda: api.gemm_ar(a.t().contiguous().t(), b, **fused),
        "rows not whole 16-byte vectors": lambda: api.gemm_ar(torch.randn(64, 97, **bf), torch.randn(97, 64, **bf),
                                                             **fused),
        "inner dims differ": lambda: api.gemm_ar(a, torch.randn(31, 64, **bf)),
        "no rows to split": lambda: api.gemm_rs(torch.randn(0, 32, **bf), b, **fused),
        "q, k, v shapes differ": lambda: api.ring_attention(q, q[:, :1].contiguous(), q),
        "head dim not one the tile takes": lambda: api.ring_attention(*(torch.randn(1, 2, 64, 24, **bf),) * 3, **fused),
        "an unknown mode": lambda: api.gemm_ar(a, b, mode="fastest"),
        "gpus_per_node does not divide the group": lambda: api.gemm_ar(a, b, gpus_per_node=3),
        "3-D operand": lambda: api.ag_gemm(a.view(2, 32, 32), b),
        "moe tokens differ from the routing": lambda: api.moe_dispatch_gemm(x[:32].contiguous(), w, moe),
        "moe experts stacked for another group size": lambda: api.moe_dispatch_gemm(x, w[:32].contiguous(), moe),
        "context with too few flags": lambda: executor(gemm, n_flags=sizes["n_flags"] - 1),
        "context of another group size": lambda: executor(twice),
        "a negative count of calls in flight": lambda: executor(gemm, knobs=HwKnobs(loopback_inflight=-1)),
        "a second executor on one context": lambda: executor(gemm, second=True),
    }
    if sizes["recv_bytes"] > 256:  # at world 1 nothing lives in the heap
        cases["context heap too small"] = lambda: executor(gemm, recv_bytes=sizes["recv_bytes"] // 2)
    out = {}
    for name, call in cases.items():
        try:
            call()
            out[name] = None  # accepted: a defect
        except InputError as exc:
            out[name] = str(exc)
        except Exception as exc:  # noqa: BLE001 - the wrong kind of error: reported as such
            out[name] = f"WRONG KIND {type(exc).__name__}: {exc}"
    api.close()
    return out
