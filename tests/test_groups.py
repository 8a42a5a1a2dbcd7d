"""Grouped tasks (issue 30): a group stands for exactly the tasks it replaced.

Golden schedules (tests/data/golden_schedules.json): a hash of every task of every op and variant
on small clusters, as the builders made them before grouped tasks (main f138637). For each, the
flat build and the expanded grouped build both hash to it, task for task (ids, ranks, regions,
waits, signals, labels, in order). The hw tables of a grouped schedule equal those of the flat
one, validate judges a grouped schedule as it judges its expansion, and grouped runs simulate the
flat times. Regenerate the
hashes only for a deliberate change of a schedule: ``python tests/test_groups.py --write`` (it
hashes the expanded builds of the code at hand).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from pathlib import Path

import pytest

from mkernel.errors import ScheduleError
from mkernel.ir import Op, Region, Role, ScheduleBuilder, Signal, Step, Wait, expand

GOLDEN = Path(__file__).parent / "data" / "golden_schedules.json"
SHAPES = {  # small, with ragged edge tiles where the op allows them
    "gemm_ar": dict(m=700, n=520, k=64, chunk_tiles=2),
    "gemm_rs": dict(m=1536, n=520, k=64, chunk_tiles=3),
    "ag_gemm": dict(m=1536, n=300, k=128),
    "ring_attention": dict(m=256, n=2, k=128, tile_m=96),
    "moe_dispatch_gemm": dict(m=384, n=40, k=32, experts=16, topk=3, tile_m=16, tile_n=32),
}
CLUSTERS = [(1, 1), (1, 4), (2, 2), (3, 2), (2, 4), (4, 2, 2)]  # (nodes, gpus[, nodes per leaf])
VARIANTS = {
    "gemm_ar": [dict(baseline="hierarchical"), dict(baseline="ring")],
    "gemm_rs": [dict(baseline="hierarchical"), dict(baseline="ring")],
    "ag_gemm": [dict(baseline="hierarchical"), dict(baseline="ring", forward="ring")],
    "ring_attention": [dict(), dict(causal=1)],
    "moe_dispatch_gemm": [dict(routing="uniform"), dict(routing="zipf"), dict(routing="shifted")],
}


def cases():
    """(name, workload, cluster, first_nodes) for every golden schedule pair (fused and baseline)."""
    from mkernel.cluster import FabricSpec
    from mkernel.scenario import load_scenario
    from mkernel import builders

    sc = load_scenario("paper-ib-2x8")
    for kernel, shape in SHAPES.items():
        for nodes, gpus, *leaf in CLUSTERS:
            c = dataclasses.replace(sc.cluster, nodes=nodes, gpus_per_node=gpus)
            if leaf:
                c = dataclasses.replace(c, fabric=FabricSpec(nodes_per_leaf=leaf[0], oversubscription=2.0))
            for options in VARIANTS[kernel]:
                w = dataclasses.replace(sc.workload, kernel=kernel, **shape, **options)
                if kernel == "moe_dispatch_gemm":
                    w = dataclasses.replace(w, m=shape["m"] * c.world // 8, experts=4 * c.world)
                opts = ",".join(f"{k}={v}" for k, v in options.items())
                name = f"{kernel}/{nodes}x{gpus}{'/leaf' + str(leaf[0]) if leaf else ''}/{opts}"
                yield name, w, c, 0
                if builders.node_symmetric(w, c) and 0 < c.fold_nodes < c.nodes:
                    yield name + "/first_nodes", w, c, c.fold_nodes


def canon(s) -> tuple:
    """Every field of every task, and the schedule's own fields, as plain values."""
    def reg(r):
        return (r.buffer, r.rank, r.row0, r.row1, r.col0, r.col1)

    def sig(g):
        return (g.rank, g.name, g.index)

    tasks = tuple((t.id, t.rank, t.role.value, t.op.value, tuple(map(reg, t.reads)), tuple(map(reg, t.writes)),
                   t.accumulate, tuple((sig(w.signal), w.count) for w in t.waits), tuple(map(sig, t.signals)),
                   t.launch, t.chunk, t.label, tuple(t.mask), tuple(t.index)) for t in s.tasks)
    return (s.kernel, s.variant, s.world, s.gpus_per_node, s.num_sms, s.flops_per_gpu, s.first_nodes,
            tuple((b.name, b.rows, b.cols, b.dtype, b.kind.value, b.writes_per_element) for b in s.buffers),
            tuple((ln.name, tuple((r.value, n) for r, n in ln.sms)) for ln in s.launches), tasks)


def digest(s) -> str:
    return hashlib.sha256(repr(canon(s)).encode()).hexdigest()


def build_pair(w, c, first_nodes: int, expand=None):
    """The fused and baseline schedules of one case, each through ``expand`` if given."""
    from mkernel import builders

    module = builders.get(w.kernel)
    kw = {"first_nodes": first_nodes} if first_nodes else {}
    out = (module.build(w, c, **kw), module.build_baseline(w, c, **kw))
    return tuple(expand(s) for s in out) if expand else out


def build_pair_grouped(w, c, first_nodes: int):
    """The fused and baseline schedules of one case, built with groups."""
    from mkernel import builders

    module = builders.get(w.kernel)
    kw = {"first_nodes": first_nodes} if first_nodes else {}
    return module.build(w, c, grouped=True, **kw), module.build_baseline(w, c, grouped=True, **kw)


def write() -> None:
    table = {}
    for name, w, c, first in cases():
        for s in build_pair(w, c, first, expand):
            table[f"{name}/{s.variant}"] = {"tasks": len(s.tasks), "sha256": digest(s)}
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(table)} schedules to {GOLDEN}")


TABLE = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
CASES = list(cases())


@pytest.mark.parametrize("name,w,c,first", CASES, ids=[case[0] for case in CASES])
def test_flat_and_expanded_grouped_builds_equal_the_golden_schedules(name, w, c, first):
    flat = build_pair(w, c, first)
    grouped = build_pair_grouped(w, c, first)
    for f, g in zip(flat, grouped):
        want = TABLE[f"{name}/{f.variant}"]
        assert (len(f.tasks), digest(f)) == (want["tasks"], want["sha256"]), f"flat {f.variant}"
        e = expand(g)
        assert (len(e.tasks), digest(e)) == (want["tasks"], want["sha256"]), f"grouped {g.variant}"
        assert e.tasks == f.tasks
        g.validate()


@pytest.mark.parametrize("kernel", sorted(SHAPES))
def test_hw_tables_of_a_grouped_schedule_equal_the_flat_ones(kernel):
    from mkernel.hw.lowering.lower import lower

    _, w, c, first = next(case for case in CASES if case[0].startswith(f"{kernel}/2x4"))
    flat, grouped = build_pair(w, c, 0)[0], build_pair_grouped(w, c, 0)[0]
    for a, b in zip(lower(flat), lower(grouped)):
        assert a.rank == b.rank and a.sms == b.sms and a.slot_names == b.slot_names
        assert (a.slot_bumps == b.slot_bumps).all() and a.roles.keys() == b.roles.keys()
        for role in a.roles:
            for field in ("tasks", "regions", "waits", "signals", "task_ids"):
                assert (getattr(a.roles[role], field) == getattr(b.roles[role], field)).all(), (role, field)


def test_validate_checks_every_member_of_a_group():
    sb = _builder()
    sb.add(0, Role.COMPUTE, Op.COPY, reads=(Region("X", 0, 0, 1, 0, 8),), writes=(Region("X", 0, 1, 2, 0, 8),),
           label="c {}", count=9, step=Step(((0, 0, 8), (0, 0, 8)), label=(0, 1)))  # member 8 leaves X's 64 columns
    with pytest.raises(ScheduleError, match="outside buffer X"):
        sb.build(0.0).validate()
    sb = _builder()
    sb.add(0, Role.INTRA, Op.COPY, reads=(Region("X", 0, 0, 1, 0, 8),), writes=(Region("X", 0, 1, 2, 0, 8),),
           signals=(Signal(0, "s"),), label="c {}", count=3, step=Step(signals=((1, 0),), label=(0, 1)))
    with pytest.raises(ScheduleError, match="rank outside|across nodes|outside 0"):
        sb.build(0.0).validate()  # member 2 signals rank 2 of a 2-rank world


@pytest.mark.parametrize("kernel,shape", [("gemm_ar", dict(m=4096, n=4096, k=64)),
                                          ("gemm_rs", dict(m=4096, n=4096, k=64)),
                                          ("ag_gemm", dict(m=4096, n=4096, k=64)),
                                          ("ring_attention", dict(m=2048, n=2, k=128, tile_m=128))])
def test_grouping_shrinks_the_schedules(kernel, shape):
    """The point of groups: both schedules of each tiled op are far fewer tasks than members."""
    _, w, c, first = next(case for case in CASES if case[0].startswith(f"{kernel}/2x4"))
    w = dataclasses.replace(w, **shape)
    for f, g in zip(build_pair(w, c, 1), build_pair_grouped(w, c, 1)):
        assert len(expand(g).tasks) == len(f.tasks)
        assert len(g.tasks) < 0.6 * len(f.tasks), (g.variant, len(g.tasks), len(f.tasks))


def _builder() -> ScheduleBuilder:
    sb = ScheduleBuilder("t", "fused", 2, 2, 8, grouped=True)
    sb.buffer("X", 4, 64)
    sb.launch("l", {Role.COMPUTE: 2, Role.INTRA: 2})
    return sb


def test_members_step_every_number_and_keep_the_rest():
    sb = _builder()
    g = sb.add(0, Role.INTRA, Op.COPY, reads=(Region("X", 0, 0, 1, 0, 8),), writes=(Region("X", 1, 1, 2, 0, 8),),
               waits=(Wait(Signal(0, "w", 3), 2),), signals=(Signal(1, "s", 10), Signal(0, "t")), chunk=-1,
               label="copy {} now", count=3, step=Step(((0, 0, 8), (0, 1, 16)), ((0, 2), (0, 0)), (1,), 0, (5, 7)))
    m = g.members()
    assert [t.id for t in m] == [0, 1, 2] and [t.label for t in m] == ["copy 5 now", "copy 12 now", "copy 19 now"]
    assert m[2].reads == (Region("X", 0, 0, 1, 16, 24),) and m[2].writes == (Region("X", 1, 3, 4, 32, 40),)
    assert m[2].waits == (Wait(Signal(0, "w", 5), 2),) and m[2].signals == (Signal(1, "s", 14), Signal(0, "t"))
    assert sb.bumped(Signal(0, "t")) == 3 and sb.bumped(Signal(1, "s", 12)) == 1
    assert sb.add(0, Role.COMPUTE, Op.NOP, label="one {}", count=1, step=Step(label=(4, 1))).label == "one 4"
    s = sb.build(0.0)
    assert [t.id for t in expand(s).tasks] == [0, 1, 2, 3]


SIM_CASES = [case for case in CASES if "/2x4/" in case[0] or "/3x2/" in case[0] or "/leaf" in case[0]]


@pytest.mark.parametrize("name,w,c,first", SIM_CASES, ids=[case[0] for case in SIM_CASES])
def test_grouped_runs_simulate_the_flat_times(name, w, c, first):
    """Runs of members give the times the members give one by one: collapsed (no hazard tracking)
    and, for full builds, tracked too (the engine then takes the expansion)."""
    from mkernel.sim import SimBackend

    for f, g in zip(build_pair(w, c, first), build_pair_grouped(w, c, first)):
        for collapse in (True, False) if not first else (True,):
            a, b = SimBackend().run(f, c, collapse=collapse), SimBackend().run(g, c, collapse=collapse)
            assert b.time_s == pytest.approx(a.time_s, rel=1e-12, abs=0), (f.variant, collapse)
            assert b.per_rank_s == pytest.approx(a.per_rank_s, rel=1e-12), (f.variant, collapse)
            assert b.bytes_total == pytest.approx(a.bytes_total, rel=1e-12) and b.hazards == a.hazards
            assert b.metrics["breakdown_us"] == pytest.approx(a.metrics["breakdown_us"], rel=1e-9, abs=1e-9)


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_groups.py --write")
    write()
