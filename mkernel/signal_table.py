"""Every member's bumps and waits of a grouped schedule as integer arrays, without making the members.

A group's member i bumps its signals moved by i times their step (or by i mod ``period`` and i div
``period`` times their steps and outer steps: :class:`~mkernel.ir.Step`), and waits on its waits'
signals moved by i times their index step; one record per (entry, signal) and per (entry, wait)
and the entries' counts give them all by index arithmetic. Each (rank, name, index) key becomes one
dense integer. Why: a 2 x 8 GEMM+AR of 32768^2 bumps about 900k member keys, and making them tuples
one task at a time cost a quarter of validate(); its signal counts and its cycle graph read them here.

A signal that does not step is one record standing for all of its group's bumps (``times`` = the
count), as :func:`~mkernel.ir.bump_keys` lists it; a wait that does not step is checked at member 0
alone (every member waits for the same). Read after the per-task rules, which check that every
group's steps fit it.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from operator import attrgetter

import numpy as np

from .ir import Schedule
from .members import ragged

_SIGNAL = attrgetter("rank", "index")
_WAIT = attrgetter("signal.rank", "signal.index", "count")


@dataclass(frozen=True, eq=False)
class SignalTable:
    """Bumps and waits of every member of a schedule, keys numbered densely (``keys`` of them).

    Bumps: ``bump_entry``, ``bump_key``, ``bump_times`` (one record per signal that does not step,
    ``times`` its group's count; one per member for one that steps). Waits: ``wait_entry``, its
    index ``wait_j`` in the entry's waits, the ``wait_member`` (0 for a wait that does not step),
    ``wait_key`` and ``wait_count``; in the order entry, wait, member."""

    keys: int
    bump_entry: np.ndarray
    bump_key: np.ndarray
    bump_times: np.ndarray
    wait_entry: np.ndarray
    wait_j: np.ndarray
    wait_member: np.ndarray
    wait_key: np.ndarray
    wait_count: np.ndarray


def signal_table(s: Schedule, home: list[int] | None = None) -> SignalTable:
    """The bumps and waits of every member of ``s``, each rank's keys counted at ``home[rank]``
    where given (a partial build's: :func:`~mkernel.ir.count_homes`)."""
    tasks, n = s.tasks, len(s.tasks)
    count = np.fromiter(map(attrgetter("count"), tasks), np.int64, n)
    names: dict[str, int] = {}
    code = names.setdefault

    signals = [t.signals for t in tasks]
    per = np.fromiter(map(len, signals), np.int64, n)
    flat = list(chain.from_iterable(signals))
    entry, _ = ragged(per)
    rank, index = np.fromiter(chain.from_iterable(map(_SIGNAL, flat)), np.int64, 2 * len(flat)).reshape(-1, 2).T
    name = np.fromiter((code(g.name, len(names)) for g in flat), np.int64, len(flat))
    steps = np.zeros((len(flat), 4), np.int64)  # rank, index steps; outer rank, index steps
    period = np.zeros(n, np.int64)
    stepped = [p for p, t in enumerate(tasks) if t.count > 1 and t.step.signals]
    if stepped:
        at = np.array(stepped, np.int64)
        which, j = ragged(per[at])
        rows = (np.cumsum(per) - per)[at][which] + j
        sts = [tasks[p].step for p in stepped]
        steps[rows, :2] = np.fromiter(chain.from_iterable(chain.from_iterable(st.signals for st in sts)), np.int64,
                                      2 * len(rows)).reshape(-1, 2)
        cycling = np.fromiter((st.period > 0 for st in sts), bool, len(sts))[which]  # (outer steps: Step.period)
        if cycling.any():
            steps[rows[cycling], 2:] = np.fromiter(chain.from_iterable(chain.from_iterable(
                st.outer for st in sts if st.period)), np.int64, 2 * int(cycling.sum())).reshape(-1, 2)
        period[at] = [st.period for st in sts]
    moving = steps.any(axis=1)
    fixed = ~moving
    who, i = ragged(count[entry[moving]])
    rec = np.flatnonzero(moving)[who]
    p = period[entry[rec]]
    p = np.where(p > 0, p, count[entry[rec]])  # (no period: i mod count is i, i div count 0)
    b, a = i % p, i // p
    st = steps[rec]
    bump_rank = np.concatenate((rank[fixed], rank[rec] + b * st[:, 0] + a * st[:, 2]))
    bump_index = np.concatenate((index[fixed], index[rec] + b * st[:, 1] + a * st[:, 3]))
    bump_name = np.concatenate((name[fixed], name[rec]))
    bump_entry = np.concatenate((entry[fixed], entry[rec]))
    bump_times = np.concatenate((count[entry[fixed]], np.ones(len(rec), np.int64)))

    waits = [t.waits for t in tasks]
    per_w = np.fromiter(map(len, waits), np.int64, n)
    flat_w = list(chain.from_iterable(waits))
    w_entry, w_j = ragged(per_w)
    w_rank, w_index, w_count = np.fromiter(chain.from_iterable(map(_WAIT, flat_w)), np.int64,
                                           3 * len(flat_w)).reshape(-1, 3).T
    w_name = np.fromiter((code(w.signal.name, len(names)) for w in flat_w), np.int64, len(flat_w))
    dx = np.zeros(len(flat_w), np.int64)
    stepped = [p for p, t in enumerate(tasks) if t.count > 1 and t.step.waits]
    if stepped:
        at = np.array(stepped, np.int64)
        which, j = ragged(per_w[at])
        dx[(np.cumsum(per_w) - per_w)[at][which] + j] = np.fromiter(
            chain.from_iterable(tasks[p].step.waits for p in stepped), np.int64, len(which))
    members = np.where(dx != 0, count[w_entry], 1)
    rec, member = ragged(members)
    wait_rank, wait_index = w_rank[rec], w_index[rec] + member * dx[rec]

    if home is not None:
        homes = np.array(home, np.int64)
        bump_rank, wait_rank = homes[bump_rank], homes[wait_rank]
    key = _dense(np.concatenate((bump_name, w_name[rec])), np.concatenate((bump_rank, wait_rank)),
                 np.concatenate((bump_index, wait_index)))
    nb = len(bump_entry)
    return SignalTable(int(key.max(initial=-1)) + 1, bump_entry, key[:nb], bump_times, w_entry[rec], w_j[rec], member,
                       key[nb:], w_count[rec])


def _dense(name: np.ndarray, rank: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Per (name, rank, index) row: one integer per distinct row, 0 up."""
    if not len(name):
        return np.zeros(0, np.int64)
    order = np.lexsort((index, rank, name))
    rows = np.stack((name, rank, index))[:, order]
    new = np.ones(len(order), bool)
    new[1:] = (rows[:, 1:] != rows[:, :-1]).any(axis=0)
    key = np.empty(len(order), np.int64)
    key[order] = np.cumsum(new) - 1
    return key
