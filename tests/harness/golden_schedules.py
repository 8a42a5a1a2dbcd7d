"""Golden schedules: a hash of every task of every op and variant on small clusters, as the builders
made them before grouped tasks (issue 30).

``tests/test_groups.py`` expands today's (grouped) builds and checks them against these hashes, so a
group that does not stand for exactly the tasks it replaced (ids, ranks, regions, waits, signals,
labels, in order) fails. Regenerate only for a deliberate change of a schedule:
``python tests/harness/golden_schedules.py --write`` (it hashes the expanded builds of the code at hand).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mkernel.ir import Schedule

FILE = Path(__file__).parent.parent / "data" / "golden_schedules.json"
SHAPES = {  # small, with ragged edge tiles where the op allows them
    "gemm_ar": dict(m=700, n=520, k=64, chunk_tiles=2),
    "gemm_rs": dict(m=1536, n=520, k=64, chunk_tiles=3),
    "ag_gemm": dict(m=1536, n=300, k=128),
    "ring_attention": dict(m=256, n=2, k=128, tile_m=96),
    "moe_dispatch_gemm": dict(m=384, n=40, k=32, experts=16, topk=3, tile_m=16, tile_n=32),
}
CLUSTERS = [(1, 1), (1, 4), (2, 2), (3, 2), (2, 4), (4, 2, 2)]  # (nodes, gpus[, nodes per leaf])
VARIANTS = {
    "gemm_ar": [dict(baseline="hierarchical", internode="direct"), dict(baseline="ring", internode="direct"),
                dict(internode="twoshot"), dict(internode="ring")],
    "gemm_rs": [dict(baseline="hierarchical"), dict(baseline="ring")],
    "ag_gemm": [dict(baseline="hierarchical", internode="direct"), dict(baseline="ring", internode="ring")],
    "ring_attention": [dict(), dict(causal=1)],
    "moe_dispatch_gemm": [dict(routing="uniform"), dict(routing="zipf"), dict(routing="shifted"),
                          dict(routing="zipf_shifted")],
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


def assert_lowered_alike(a: Schedule, b: Schedule) -> None:
    """The hw lowering's tables of ``a`` and ``b`` are equal, rank by rank and role by role (it
    expands groups through ``Task.member``: a grouped build lowers as the flat schedule it stands for)."""
    from mkernel.hw.lowering.lower import lower

    for x, y in zip(lower(a), lower(b), strict=True):
        assert x.rank == y.rank and x.sms == y.sms and x.slot_names == y.slot_names
        assert (x.slot_bumps == y.slot_bumps).all() and x.roles.keys() == y.roles.keys()
        for role in x.roles:
            for field in ("tasks", "regions", "waits", "signals", "task_ids"):
                assert (getattr(x.roles[role], field) == getattr(y.roles[role], field)).all(), (role, field)


def write() -> None:
    try:
        from mkernel.ir import expand
    except ImportError:  # the code before grouped tasks: its schedules are already flat
        expand = None
    table = {}
    for name, w, c, first in cases():
        for s in build_pair(w, c, first, expand):
            table[f"{name}/{s.variant}"] = {"tasks": len(s.tasks), "sha256": digest(s)}
    FILE.parent.mkdir(exist_ok=True)
    FILE.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(table)} schedules to {FILE}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/harness/golden_schedules.py --write")
    write()
