"""GEMM+AR's compute groups (_tiling.dealt_order_runs, made once for each chunk order and local rank, and
dealt_order_runs_of, which moves owner 0's on where the slots allow):
every rank computes its tiles slot by slot in its own node's chunk order, its own tile of each
slot first, whether the nodes visit the chunks alike (direct) or each in its own order (grouped)."""
from __future__ import annotations

import math

import pytest

from mkernel import Cluster, Workload
from mkernel.builders import _rail as rail
from mkernel.builders import gemm_ar
from mkernel.builders._tiling import tile_grid
from mkernel.ir import Op, expand


@pytest.mark.parametrize("internode,nodes,node_reduce", [("twoshot", 3, "pull"), ("ring", 3, "pull"),
                                                         ("twoshot", 3, "push"), ("direct", 2, "pull")])
def test_each_rank_computes_its_tiles_in_its_nodes_chunk_order(internode, nodes, node_reduce):
    w = Workload(kernel="gemm_ar", m=1024, n=1024, k=64, chunk_tiles=2, internode=internode, node_reduce=node_reduce)
    c = Cluster("t", nodes, 2)
    g, ct = c.gpus_per_node, w.chunk_tiles
    tiles = tile_grid(w.m, w.n, w.tile_m, w.tile_n)
    at = {(t.row0, t.col0): t.index for t in tiles}
    slots = math.ceil(len(tiles) / g)
    algorithm, whole, _ = gemm_ar.plan(w, c)
    assert whole or internode == "direct"  # (grouped chunks: each node's order its own)
    s = expand(gemm_ar.build(w, c, grouped=True))
    orders = set()
    for rank in range(c.world):
        node, local = c.node_of(rank), c.local_of(rank)
        order = rail.chunk_order(math.ceil(slots / ct), whole, nodes, node, algorithm)
        orders.add(tuple(order))
        want = [slot * g + (local + k) % g for ci in order for slot in range(ci * ct, min(slots, (ci + 1) * ct))
                for k in range(g)]
        got = [at[t.writes[0].row0, t.writes[0].col0] for t in s.tasks if t.rank == rank and t.op is Op.GEMM]
        assert got == want, rank
    assert len(orders) == (1 if internode == "direct" else nodes)


@pytest.mark.parametrize("m,n", [(1024, 2048), (1000, 2048), (1024, 1800), (256, 512), (2048, 256)])
def test_every_owners_groups_are_what_dealt_order_runs_cuts_for_it(m, n):
    """_tiling.dealt_order_runs_of (owner 0's groups moved to each owner where every slot is one
    row's tiles of one width) against dealt_order_runs asked for each owner, on even and ragged
    grids, in and out of chunk order, cycled or not."""
    import numpy as np

    from mkernel.builders._tiling import dealt_order_runs, dealt_order_runs_of

    tiles = tile_grid(m, n, 128, 256)
    for g, ct in ((2, 2), (4, 1), (4, 3), (8, 4)):
        slots = math.ceil(len(tiles) / g)
        nchunks = math.ceil(slots / ct)
        index = np.arange(len(tiles))
        for order in (list(range(nchunks)), list(reversed(range(nchunks))),
                      [ci for pair in zip(range(0, nchunks, 2), range(1, nchunks, 2)) for ci in pair[::-1]]):
            position = np.argsort(np.array(order + [ci for ci in range(nchunks) if ci not in order]))
            rel = (position[index // g // ct] * ct + index // g % ct) * g + index % g
            for cycled, local_fold in ((True, False), (True, True), (False, False)):
                locals_ = range(0, g, g if local_fold else 1)
                got = dealt_order_runs_of(m, n, 128, 256, g, ct, order, locals_, rel, cycled, g, local_fold)
                want = {local: dealt_order_runs(m, n, 128, 256, g, ct, order, local, rel, cycled, g, local_fold)
                        for local in locals_}
                assert got == want, (g, ct, order[:4], cycled, local_fold)
