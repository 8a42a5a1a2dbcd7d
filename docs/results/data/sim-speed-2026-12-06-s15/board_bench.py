"""What the board's storage costs a bump, at the every-node row's GEMM far-flag pattern (57,344 tile
flags, each bumped by 8 ranks: 458,752 bumps in ~9k lane calls of 51 keys): today's dict of
(rank, name, index) tuples to [count, waiters, least need] cells, against dense integer keys in an
array('q') (Python, one index a bump) and the same array bumped by numpy (np.add.at over a call's
keys, through a view of the array). Keys are made before timing in every case (the tuples' own
making is counted apart). usage: python board_bench.py"""
import random
import time
from array import array

import numpy as np

nk = 57344
order = [k for k in range(nk) for _ in range(8)]
random.seed(1)
random.shuffle(order)
calls = [order[i:i + 51] for i in range(0, len(order), 51)]
tkeys = [[(k % 16, "contrib", k // 16) for k in c] for c in calls]
ikeys = [np.array(c, np.int64) for c in calls]
NEVER = 1 << 62
cells: dict = {}
counts = array("q", bytes(8 * nk))
least = array("q", [NEVER]) * nk
view, lview = np.frombuffer(counts, np.int64), np.frombuffer(least, np.int64)


def dict_cells():
    get = cells.get
    for ks in tkeys:
        for key in ks:
            cell = get(key)
            if cell is None:
                cells[key] = [1, None, NEVER]
                continue
            value = cell[0] = cell[0] + 1
            if value < cell[2]:
                continue


def array_python():
    for ks in calls:
        for k in ks:
            value = counts[k] = counts[k] + 1
            if value < least[k]:
                continue


def array_numpy():
    for ks in ikeys:
        np.add.at(view, ks, 1)
        if (view[ks] >= lview[ks]).any():
            pass


def make_tuples():
    return [[(k % 16, "contrib", k // 16) for k in c] for c in calls]


for f in (dict_cells, array_python, array_numpy, make_tuples):
    t = time.process_time()
    f()
    print(f"{f.__name__:14s} {(time.process_time() - t) * 1e3:6.0f} ms  ({len(order)} bumps, {len(calls)} calls)")
