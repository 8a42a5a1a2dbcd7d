"""GEMM+AR build's drain against the plain way it replaces, every form of several cases and variants:
it waits for one bump of out_done a tile (``gemm_ar._drain``), where the plain way asks
ScheduleBuilder.bumped, which counts the build's bumps (folded ones too). And the build's shortcuts:
owners' chunks from their runs (``gemm_ar.chunks_of``) against ``batches``, and the objects the intra
queue shares (a broadcast's label tuple with its tile's sum, PART rows among ranks)."""
from __future__ import annotations

import dataclasses

import pytest
from harness import frozen_builds as frozen

from mkernel.builders import gemm_ar
from mkernel.builders._tiling import batches, strided_chunk_runs, tile_grid
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


@pytest.mark.parametrize("shape", [(96, 160, 16, 32), (100, 150, 16, 32), (130, 250, 16, 32), (64, 64, 16, 16),
                                   (17, 500, 16, 32)])
@pytest.mark.parametrize("stride,size", [(1, 1), (2, 3), (4, 2), (3, 5), (8, 4)])
def test_chunks_of_are_the_owners_batches(shape, stride, size):
    m, n, tm, tn = shape
    for first in range(min(stride * 2, len(tile_grid(m, n, tm, tn)))):
        cuts = strided_chunk_runs(m, n, tm, tn, first, stride, size)
        chunks = gemm_ar.chunks_of(cuts)
        assert chunks == batches(list(tile_grid(m, n, tm, tn)[first::stride]), size)
        assert all(type(chunk) is list for chunk in chunks)


@pytest.mark.parametrize("shape", [(1, 4), (2, 4), (2, 8)])
def test_the_intra_queue_shares_labels_and_rows(shape):
    """A broadcast's step takes its tile's sum step's label tuple, and every rank's PART regions of a slot
    take one int object for each row bound (equal values either way: the frozen builds hold those)."""
    from mkernel.scenario import load_scenario

    sc = load_scenario("paper-ib-2x8")
    c = dataclasses.replace(sc.cluster, nodes=shape[0], gpus_per_node=shape[1])
    w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=2048, n=4096, k=16, tile_m=128, tile_n=128, chunk_tiles=2,
                            internode="direct")
    s = gemm_ar.build(w, c, grouped=True)
    sums = {(t.rank, t.step.label[0]): t for t in s.tasks if t.op is Op.REDUCE and t.role is Role.INTRA and t.step}
    bcasts = [t for t in s.tasks if t.op is Op.COPY and t.role is Role.INTRA and t.step]
    assert bcasts and all(t.step.label is sums[t.rank, t.step.label[0]].step.label for t in bcasts)
    rows: dict[int, int] = {}
    parts = [r for t in s.tasks if t.role is Role.INTRA for r in t.writes if r.buffer == "PART"]
    assert len(parts) > 1 or shape[0] == 1
    for r in parts:
        for x in (r.row0, r.row1):
            assert rows.setdefault(x, x) is x
