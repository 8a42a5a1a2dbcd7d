"""Folding local ranks (sim/localfold.py): a folded run reports what the unfolded collapsed run
reports; runs it may not fold are refused before any check, and say why; asymmetric schedules are
caught by the check, not assumed away."""
from __future__ import annotations

import dataclasses

import pytest

from mkernel import Cluster, Op, Workload, builders
from mkernel.controller import Balance, sim_controller
from mkernel.sim import SimBackend
from mkernel.sim import backend as sim_backend
from mkernel.sim.collapse import collapse, is_node_symmetric
from mkernel.sim import localfold
from mkernel.sim.localfold import NotFoldable

# Summed over ranks: a folded run multiplies one rank's sum by G where the unfolded one adds G terms.
SUMMED = ("proxy_busy_us", "fence_wait_us", "ring_wait_us", "credit_wait_us")
# Times (the run's and every rank's) agree bit for bit. Durations summed over many events
# (proxy_queueing, the SUMMED waits) agree to a few hundred ulps of the time they sum to: the
# folded run puts the G legs a flow has on G peers' NVLink ports onto the base's one port, so the
# max-min solver sums the same weights in another grouping, and the sums add G terms or one x G.
REL, ABS_US = 1e-12, 1e-9


def cluster(nodes: int, gpus: int, transport: str = "ib_rc", **nic) -> Cluster:
    c = Cluster("t", nodes, gpus, transport=transport)
    return dataclasses.replace(c, nic=dataclasses.replace(c.nic, **{"srd_jitter_us": 0.0, **nic}))


def workload(kernel: str, c: Cluster) -> Workload:
    if kernel == "ring_attention":
        return Workload(kernel=kernel, m=96, n=2, k=32, tile_m=16, causal=1)
    if kernel == "moe_dispatch_gemm":
        return Workload(kernel=kernel, m=48 * c.world, n=40, k=32, experts=4 * c.world, topk=3, tile_m=16,
                        tile_n=32, routing="zipf_shifted")
    return Workload(kernel=kernel, m=1536, n=1536, k=128)


def unfolded(monkeypatch, s, c, **kw):
    """The collapsed run as it was before folding: every rank of the simulated node simulated."""
    def off(_s):
        raise NotFoldable("switched off by the test")

    with monkeypatch.context() as m:
        m.setattr(sim_backend, "fold_locals", off)
        return SimBackend().run(s, c, collapse=True, **kw)


def assert_same(folded, full):
    """Every field a result reports, but wall time, the event count and what says how it ran."""
    assert folded.time_s == full.time_s and folded.per_rank_s == full.per_rank_s
    assert folded.bytes_total == full.bytes_total and folded.bytes_per_gpu == full.bytes_per_gpu
    assert (folded.outputs, folded.spans, folded.counters, folded.hazards) == (full.outputs, full.spans,
                                                                               full.counters, full.hazards)
    mine, theirs = dict(folded.metrics), dict(full.metrics)
    for m in (mine, theirs):
        m.pop("ranks_folded")
    assert mine.keys() == theirs.keys()
    for key in mine:
        if key in SUMMED or key == "breakdown_us":
            assert mine[key] == pytest.approx(theirs[key], rel=REL, abs=ABS_US), key
        else:
            assert mine[key] == theirs[key], key


SHAPES = [(2, 2, "ib_rc"), (2, 4, "ib_rc"), (4, 2, "ibgda"), (3, 2, "ib_rc"), (2, 4, "efa_srd")]


@pytest.mark.parametrize("kernel", ["gemm_ar", "gemm_rs", "ag_gemm", "ring_attention"])
@pytest.mark.parametrize("nodes,gpus,transport", SHAPES)
def test_folded_run_reports_what_the_unfolded_run_does(monkeypatch, kernel, nodes, gpus, transport):
    c = cluster(nodes, gpus, transport)
    module = builders.get(kernel)
    for s in (module.build(workload(kernel, c), c), module.build_baseline(workload(kernel, c), c)):
        folded = SimBackend().run(s, c, collapse=True)
        assert folded.metrics["collapsed"] and folded.metrics["ranks_folded"] == gpus, s.variant
        full = unfolded(monkeypatch, s, c)
        assert full.metrics["ranks_folded"].startswith("not rotation-symmetric")
        assert_same(folded, full)
        assert folded.events < full.events


def test_folded_run_gives_the_full_runs_times():
    """Not only the collapsed run's: every rank of every node, run in full."""
    c = cluster(2, 4)
    s = builders.get("gemm_ar").build(workload("gemm_ar", c), c)
    folded, full = SimBackend().run(s, c, collapse=True), SimBackend().run(s, c)
    assert folded.metrics["ranks_folded"] == 4
    assert folded.per_rank_s == pytest.approx(full.per_rank_s, rel=REL)
    assert folded.bytes_total == full.bytes_total and folded.bytes_per_gpu == full.bytes_per_gpu


def _never(_s):
    raise AssertionError("a refused run must not reach the symmetry check")


@pytest.mark.parametrize("case,reason", [
    ("controller", "a controller"), ("trace", "a trace"), ("stress", "stress"), ("nics", "2 NICs per GPU"),
    ("jitter", "SRD jitter"), ("one gpu", "one GPU per node")])
def test_refused_before_the_check_and_run_as_before(monkeypatch, case, reason):
    c = (cluster(2, 2, count=2) if case == "nics" else cluster(2, 2, "efa_srd", srd_jitter_us=2.0) if case == "jitter"
         else cluster(3, 1) if case == "one gpu" else cluster(2, 2))

    def options() -> dict:  # a fresh controller for each run: it keeps state
        return {"controller": {"controller": sim_controller(Balance.for_cluster(c))}, "trace": {"trace": True},
                "stress": {"stress": 0.5}}.get(case, {})

    s = builders.get("gemm_ar").build(workload("gemm_ar", c), c)
    with monkeypatch.context() as m:
        m.setattr(sim_backend, "fold_locals", _never)
        refused = SimBackend().run(s, c, collapse=True, **options())
    assert refused.metrics["collapsed"] and reason in refused.metrics["ranks_folded"]
    if case not in ("stress", "jitter"):  # their draws follow the simulated ranks: a full run draws others
        full = SimBackend().run(s, c, **{k: v for k, v in options().items() if k != "trace"})
        assert refused.per_rank_s == full.per_rank_s and refused.bytes_total == full.bytes_total


def _on_local_rank_1(s, change):
    """``s`` with ``change(tasks)`` applied to the task list of local rank 1 on every node alike (so
    the schedule stays node-symmetric and collapses, and only the rotation check can refuse it)."""
    tasks = list(s.tasks)
    for rank in range(1, s.world, s.gpus_per_node):
        mine = [i for i, t in enumerate(tasks) if t.rank == rank]
        for i, t in zip(mine, change([tasks[i] for i in mine])):
            tasks[i] = t
    return dataclasses.replace(s, tasks=tuple(tasks))


def _swap_bumps(ts):  # the first two tiles bump each other's flags: same work, other signals
    a, b = ts[0], ts[1]
    return [dataclasses.replace(a, signals=b.signals), dataclasses.replace(b, signals=a.signals)] + ts[2:]


def _swap_last_bumps(ts):  # the same for the last two single tasks that bump: found at the end of the check
    i, j = [k for k, t in enumerate(ts) if t.signals and t.count == 1 and len(t.signals) == 1][-2:]
    ts = list(ts)
    ts[i], ts[j] = dataclasses.replace(ts[i], signals=ts[j].signals), dataclasses.replace(ts[j], signals=ts[i].signals)
    return ts


def _half_tile(ts):  # the first tile computes half its rows: other work
    a, b = ts[0].reads
    return [dataclasses.replace(ts[0], reads=(dataclasses.replace(a, row1=(a.row0 + a.row1) // 2), b))] + ts[1:]


def _same_wait(ts):  # the second waiting task waits on the first one's signal: other waits, same shapes
    waiting = [i for i, t in enumerate(ts) if t.waits and t.count == 1]
    i, j = waiting[0], next(j for j in waiting if ts[j].waits[0].signal != ts[waiting[0]].waits[0].signal)
    ts = list(ts)
    ts[j] = dataclasses.replace(ts[j], waits=(dataclasses.replace(ts[j].waits[0], signal=ts[i].waits[0].signal),)
                                + ts[j].waits[1:])
    return ts


@pytest.mark.parametrize("change,reason", [
    (_swap_bumps, "bumps other signals than"), (_swap_last_bumps, "bumps other signals than"),
    (_half_tile, "does other work or reaches other ranks than"), (_same_wait, "waits on other signals than")])
def test_a_local_rank_that_differs_is_caught_and_run_in_full(monkeypatch, change, reason):
    c = cluster(2, 2)
    s = _on_local_rank_1(builders.get("gemm_ar").build(workload("gemm_ar", c), c), change)
    assert is_node_symmetric(s)
    run = SimBackend().run(s, c, collapse=True)
    said = str(run.metrics["ranks_folded"])
    assert run.metrics["collapsed"] and said.startswith("not rotation-symmetric") and reason in said, said
    assert "rank 1" in said and "of rank 0" in said, said  # names the task that differs and the base's
    full = SimBackend().run(s, c)
    assert run.per_rank_s == full.per_rank_s and run.bytes_total == full.bytes_total


def test_moe_routing_differs_by_local_rank_and_is_not_folded():
    """A real schedule the check refuses: each rank's tokens go to other experts."""
    c = cluster(2, 2)
    module, w = builders.get("moe_dispatch_gemm"), workload("moe_dispatch_gemm", c)
    for s in (module.build(w, c), module.build_baseline(w, c)):
        run = SimBackend().run(s, c, collapse=True)
        assert run.metrics["collapsed"] and run.metrics["ranks_folded"].startswith("not rotation-symmetric"), s.variant
        full = SimBackend().run(s, c)
        assert run.per_rank_s == full.per_rank_s and run.bytes_total == full.bytes_total


def test_queues_of_other_lengths_are_refused_before_any_member_is_read(monkeypatch):
    """The cheapest test comes first: a refused run pays for the entries' counts alone."""
    c = cluster(2, 2)
    s = builders.get("gemm_ar").build(workload("gemm_ar", c), c)
    last = max(t.id for t in s.tasks if t.rank == 1)
    s = collapse(dataclasses.replace(s, tasks=tuple(t for t in s.tasks if t.id != last)), 1)

    def unread(*_a):
        raise AssertionError("a member was read")

    with monkeypatch.context() as m:
        m.setattr(localfold._Fold, "_shape", unread)
        with pytest.raises(NotFoldable, match="of rank 1 has .* members, rank 0's"):
            localfold.fold_locals(s)


def test_a_gemm_ar_build_of_local_rank_0_is_refused_where_its_ranks_differ():
    """A 300 x 520 GEMM+AR on 2 GPUs a node deals slots of tiles of two shapes, so its local ranks run
    different queues: a build of local rank 0 alone is refused (the folded run deadlocked), and the
    shape that deals evenly still builds."""
    from mkernel import ProblemError, Workload
    from mkernel.builders import gemm_ar

    c = Cluster("t", 2, 2)
    with pytest.raises(ProblemError, match="local_fold"):
        gemm_ar.build(Workload(m=300, n=520, k=72), c, first_nodes=1, grouped=True, local_fold=True)
    assert gemm_ar.build(Workload(m=256, n=512, k=64), c, first_nodes=1, grouped=True, local_fold=True).local_fold
