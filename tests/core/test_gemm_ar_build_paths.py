"""GEMM+AR build's drain against the plain way it replaces, every form of several cases and variants:
it waits for one bump of out_done a tile (``gemm_ar._drain``), where the plain way asks
ScheduleBuilder.bumped, which counts the build's bumps (folded ones too)."""
from __future__ import annotations

import dataclasses

import pytest
from harness import frozen_builds as frozen

from mkernel.builders import gemm_ar
from mkernel.ir import Op, Role, Wait

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


def _forms(w, c) -> dict[str, str]:
    return {form: frozen.digest(s) for form, s in frozen.builds(w, c) if form.endswith("fused")}


@pytest.mark.parametrize("shape", CASES, ids=[f"{n}x{g}-{d['m']}x{d['n']}" for (n, g), d in CASES])
@pytest.mark.parametrize("variant", VARIANTS, ids="/".join)
def test_the_drain_builds_what_the_plain_way_builds(shape, variant, monkeypatch):
    from mkernel.scenario import load_scenario

    (nodes, gpus), dims = shape
    sc = load_scenario("paper-ib-2x8")
    c = dataclasses.replace(sc.cluster, nodes=nodes, gpus_per_node=gpus)
    w = dataclasses.replace(sc.workload, kernel="gemm_ar", internode=variant[0], node_reduce=variant[1], **dims)
    fast = _forms(w, c)
    monkeypatch.setattr(gemm_ar, "_drain", _drain_by_bumped)
    assert _forms(w, c) == fast
