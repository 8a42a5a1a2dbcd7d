"""What the design's streak step would pay in numpy on this machine: the per-call cost of the operations a
streak's bump, release check and take would use, at the row's streak sizes (116 members of an intra or receive
role, 928 GEMM members, keys in a 2.6M-slot array), against the same on 7 members (one lane event). timeit,
best of 5. Run with the venv active."""
import timeit

import numpy as np

rng = np.random.default_rng(30)
values = np.zeros(2_600_000, np.int64)
need = np.full(2_600_000, np.iinfo(np.int64).max, np.int64)
need[rng.choice(2_600_000, 20_000, replace=False)] = 1
for n in (7, 116, 928):
    key0 = rng.integers(0, 2_000_000, 16)
    ids = (key0[:, None] + np.arange(max(1, n // 16))[None, :] * 3).reshape(-1)[:n]
    ops = {
        "key ids (repeat + arange)": lambda: np.repeat(key0, max(1, n // 16)) + np.tile(np.arange(max(1, n // 16)), 16) * 3,
        "np.add.at(values, ids, 1)": lambda: np.add.at(values, ids, 1),
        "values[ids] += 1 (no repeats)": lambda: values.__setitem__(ids, values[ids] + 1),
        "hit = need[ids] <= values[ids]": lambda: need[ids] <= values[ids],
        "np.flatnonzero(mask)": lambda: np.flatnonzero(need[ids] <= values[ids]),
        "cumsum + searchsorted": lambda: np.searchsorted(np.cumsum(ids), 5),
    }
    for name, fn in ops.items():
        us = min(timeit.repeat(fn, number=2000, repeat=5)) / 2000 * 1e6
        print(f"n={n:4d}  {name:34s} {us:6.2f} us")
