"""GEMM+AR build's shortcuts against the plain ways they replace, every form of several cases:

- the drain waits for one bump of out_done a tile (``gemm_ar._drain``), where the plain way asks
  ScheduleBuilder.bumped, which counts the build's bumps (folded ones too);
- one-peer puts are cut into runs of chunks on arrays (``_gemm_ar_net._puts_to_one_peer``), where
  the plain way compared each chunk with the one before it.
"""
from __future__ import annotations

import dataclasses

import pytest
from harness import frozen_builds as frozen

from mkernel.builders import _gemm_ar_net as net
from mkernel.builders import gemm_ar
from mkernel.ir import Op, Role, Signal, Step, Wait

CASES = [((1, 4), dict(m=96, n=160, k=16, tile_m=16, tile_n=32, chunk_tiles=3)),
         ((2, 1), dict(m=96, n=150, k=16, tile_m=16, tile_n=32, chunk_tiles=2)),
         ((2, 4), dict(m=100, n=150, k=16, tile_m=16, tile_n=32, chunk_tiles=3)),
         ((2, 4), dict(m=128, n=256, k=16, tile_m=16, tile_n=32, chunk_tiles=2)),
         ((3, 2), dict(m=96, n=192, k=16, tile_m=16, tile_n=32, chunk_tiles=1)),
         ((2, 8), dict(m=256, n=512, k=16, tile_m=16, tile_n=32, chunk_tiles=4))]
VARIANTS = [(a, r) for a in ("direct", "twoshot", "ring") for r in ("pull", "push")]  # (every GEMM+AR variant)


def _drain_by_bumped(sb, out_done, tiles) -> None:
    """The plain drain: each rank waits for the bumps the builder counted of its out_done."""
    for rank in sb.ranks():
        sig = out_done(rank)
        sb.add(rank, Role.COMPUTE, Op.NOP, waits=(Wait(sig, sb.bumped(sig)),), label="drain")


def _puts_one_by_one(x, visit: list, m: int) -> None:
    """The plain one-peer puts: chunks compared one by one with the one before."""
    sb, w, c, rank, regs = x.sb, x.w, x.c, x.rank, x.regs
    g, node = c.gpus_per_node, c.node_of(rank)
    peer = c.rank(m, c.local_of(rank))
    runs: list[list] = []
    pj = pci = -2
    size = first = 0
    for item in visit:
        j, ci, chunk = item
        if j == pj + 1 and ci == pci + 1 and len(chunk) == size and first + size * g == chunk[0].index:
            runs[-1].append(item)
        else:
            runs.append([item])
        pj, pci, size, first = j, ci, len(chunk), chunk[0].index
    for run in runs:
        j, ci, chunk = run[0]
        rows = len(chunk) * w.tile_m
        sb.add(rank, Role.SEND, Op.PUT, waits=(Wait(Signal(rank, "chunk_ready", j), len(chunk)),), chunk=j,
               reads=(regs.chunk("PART", rank, chunk),), writes=(regs.chunk("RECV", peer, chunk, node),),
               signals=(Signal(peer, "arrived", j),), label=f"chunk {{}} to node {m}", count=len(run),
               step=Step(((0, rows, 0), (0, rows, 0)), ((0, 1),), (1,), 1, (ci, 1)))


def _forms(w, c) -> dict[str, str]:
    return {form: frozen.digest(s) for form, s in frozen.builds(w, c) if form.endswith("fused")}


@pytest.mark.parametrize("shape", CASES, ids=[f"{n}x{g}-{d['m']}x{d['n']}" for (n, g), d in CASES])
@pytest.mark.parametrize("variant", VARIANTS, ids="/".join)
def test_shortcuts_build_what_the_plain_ways_build(shape, variant, monkeypatch):
    from mkernel.scenario import load_scenario

    (nodes, gpus), dims = shape
    sc = load_scenario("paper-ib-2x8")
    c = dataclasses.replace(sc.cluster, nodes=nodes, gpus_per_node=gpus)
    w = dataclasses.replace(sc.workload, kernel="gemm_ar", internode=variant[0], node_reduce=variant[1], **dims)
    fast = _forms(w, c)
    monkeypatch.setattr(gemm_ar, "_drain", _drain_by_bumped)
    monkeypatch.setattr(net, "_puts_to_one_peer", _puts_one_by_one)
    assert _forms(w, c) == fast
