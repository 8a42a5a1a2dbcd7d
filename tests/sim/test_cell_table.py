"""The signal board's CellTable (lists of cells per rank and name, a dict for far indexes) against a
plain dict of the same keys: seeded random keys, dense and sparse, rising, falling and scattered, on
several ranks and names, must find every cell made and no other, list each cell once, and keep each
block's list within its span limit."""
from __future__ import annotations

import random

import pytest

from mkernel.ir import Signal
from mkernel.sim.signals import RANK_SHIFT, SPAN_PER_CELL, SPAN_SLACK, Cell, CellTable, key_of, signal_of

_NAMES = ("ct_a", "ct_b", "ct_c")


def _indexes(rng: random.Random) -> list[int]:
    """One (rank, name)'s indexes, in the order they are met."""
    kind = rng.choice(("dense", "every8", "falling", "scattered", "far", "negative"))
    n = rng.randint(1, 400)
    if kind == "dense":
        out = list(range(rng.randint(-50, 50), 0)) + list(range(n))
    elif kind == "every8":
        out = list(range(0, 8 * n, 8))
    elif kind == "falling":
        out = list(range(3 * n, 0, -rng.choice((1, 3))))
    elif kind == "scattered":
        out = rng.sample(range(20 * n), n)
    elif kind == "far":  # mostly beyond any list's span: the spill dict
        out = [rng.randint(-2 ** 31, 2 ** 31 - 1) for _ in range(n)] + list(range(n))
    else:
        out = list(range(-1, -n, -1))
    if rng.random() < 0.3:
        rng.shuffle(out)
    return out


@pytest.mark.parametrize("seed", range(40))
def test_the_table_finds_what_a_dict_of_the_same_keys_finds(seed):
    rng = random.Random(seed)
    table, oracle = CellTable(), {}
    streams = [[key_of(rank, name, i) for i in _indexes(rng)]
               for rank in rng.sample(range(12), rng.randint(1, 4)) for name in rng.sample(_NAMES, 2)]
    made = []
    while any(streams):  # the streams interleaved, as a run's bumps and waits of many signals are
        stream = rng.choice([s for s in streams if s])
        key = stream.pop(0)
        if key in oracle:
            assert table.get(key) is oracle[key]
            continue
        assert table.get(key) is None
        cell = Cell(len(made), None, 0)
        assert table.add(key, cell) is cell
        oracle[key] = cell
        made.append(cell)
    for key, cell in oracle.items():
        assert table.get(key) is cell, (seed, key)
    for _ in range(2000):  # keys never made: on known and unknown ranks and names, near and far
        key = key_of(rng.randint(0, 14), rng.choice(_NAMES + ("ct_z",)), rng.randint(-2 ** 31, 2 ** 31 - 1)
                     if rng.random() < 0.5 else rng.randint(-100, 5000))
        assert table.get(key) is oracle.get(key), (seed, key)
    assert sorted(map(id, table.values())) == sorted(map(id, made))  # (each cell once)
    for names in table.ranks:
        for block in names:
            if block is not None:
                assert len(block.cells) <= SPAN_SLACK + SPAN_PER_CELL * block.held
                listed = sum(c is not None for c in block.cells) + len(block.spill or {})
                assert listed == block.held


def test_a_key_past_the_fields_or_on_a_negative_rank():
    table = CellTable()
    key = key_of(3, "ct_a", 7)
    table.add(key, Cell(1, None, 0))
    assert signal_of(key) == Signal(3, "ct_a", 7) and key >> RANK_SHIFT == 3
    assert table.get(-key) is None and table.get(key + (1 << RANK_SHIFT)) is None
    with pytest.raises(ValueError, match="negative rank"):
        table.add(-key, Cell(1, None, 0))
