"""validate()'s per-task rules, screened in bulk: the entries that certainly keep every one.

The per-task rules (:mod:`mkernel.validate`) cost a few microseconds of Python per entry, and a 2 x 8
GEMM+AR 32768^2 build has 188k entries (1.7 s). Most entries are plain: GEMM tiles, copies, reductions,
puts and nops, whose rules are comparisons of a few integers. :func:`cleared` decides those comparisons
for every entry at once on numpy arrays (regions from :func:`mkernel.members.read_regions`); validate
then runs the rules in Python on the entries not cleared only, in order. So its verdict and message are
the Python rules' own: an entry cleared here would pass them, and every other entry still meets them.

What clears an entry (each a superset of what the Python rules check for it): its id is its position;
its op is a GEMM, copy, reduce, put or nop, with no mask or gather index; a group (``count`` > 1) has a
step of the right lengths, signals that step and cycle a whole number of times where they cycle, a
label that takes its number where it steps, and, for a put, regions whose ranks do not step; its rank,
launch and role are those of the schedule (the launch not a left-out library call, the role given SMs
there); and its first and last members keep the region rules (known buffer, rank in range, bounds, no
write into an input), the op's arity and shapes, locality (of regions and signals), and its waits poll
its own rank for a count of at least 1. Ranks, rows and columns move by a fixed step per member, so the
rules on bounds and on the node of a rank hold for every member when they hold for the first and the
last: the argument the Python rules make for groups too (which check those two members, or every one
for a put whose ranks step). Where the members wrap (``Step.rotate``), the extremes are those either
side of the wrap; where signals cycle, a signal's rank is extreme at the corners of the (step within
a cycle, cycle) rectangle, as the Python rules' corner members.
"""
from __future__ import annotations

from itertools import chain, compress, repeat
from operator import attrgetter, contains, itemgetter

import numpy as np

from .ir import BufferKind, Op, Role, Schedule
from .signal_table import SignalTable

_PLAIN = {Op.GEMM: 0, Op.COPY: 1, Op.REDUCE: 2, Op.PUT: 3, Op.NOP: 4}  # the ops screened here
_OTHER = len(_PLAIN)
_ROLES = {role: i for i, role in enumerate(Role)}
_FIELDS = attrgetter("id", "rank", "launch")
_MASK, _INDEX, _PERIOD, _LABEL = attrgetter("mask"), attrgetter("index"), attrgetter("period"), attrgetter("label")
_ROTATE, _SIGNALS = attrgetter("rotate"), attrgetter("signals")


def cleared(s: Schedule, table: tuple, keys: SignalTable) -> np.ndarray:
    """Per entry of ``s``: whether it certainly keeps every per-task rule (see the module);
    ``table`` is :func:`mkernel.members.read_regions` of ``s``, ``keys`` its
    :func:`~mkernel.signal_table.signal_table`."""
    tasks, n, g = s.tasks, len(s.tasks), s.gpus_per_node
    count = keys.count
    tid, rank, launch = np.fromiter(chain.from_iterable(map(_FIELDS, tasks)), np.int64, 3 * n).reshape(-1, 3).T
    op = np.fromiter(map(_PLAIN.get, map(attrgetter("op"), tasks), repeat(_OTHER)), np.int64, n)
    role = np.fromiter(map(_ROLES.__getitem__, map(attrgetter("role"), tasks)), np.int64, n)
    entry, read = table[1]["entry"], table[1]["read"]  # (one record per region: reads, then writes)
    nread = np.bincount(entry[read], minlength=n)
    nwrite = np.bincount(entry, minlength=n) - nread
    ok = (tid == np.arange(n)) & (op < _OTHER) & (count >= 1) & (0 <= rank) & (rank < s.world)
    ok &= (np.fromiter(map(len, map(_MASK, tasks)), np.int64, n) == 0) & (np.fromiter(map(len, map(_INDEX, tasks)),
                                                                                   np.int64, n) == 0)
    groups, rot, cycle = _groups(tasks, op, count, table)
    ok &= groups
    budget = np.array([[dict(launch.sms).get(r, 0) > 0 for r in Role] for launch in s.launches]
                      or [[False] * len(Role)])
    budget[list(s.elided)] = False
    ok &= (0 <= launch) & (launch < len(s.launches))
    ok &= budget[np.where(ok, launch, 0), role]
    ok &= _arity(op, nread, nwrite, table)
    ok &= _regions(s, table, op, rank, count, rot)
    at = keys.signal_entry  # a signal's extreme members stay on the entry's node (but a put's, which may not):
    # its rank is affine in the step within a cycle (-rot .. cycle - rot - 1) and the cycle (0 .. count / cycle - 1)
    node, step, outer, r, cyc = rank[at] // g, keys.signal_rank_step, keys.signal_outer_step, rot[at], cycle[at]
    bad = np.zeros(len(at), bool)
    for b in (-r, cyc - r - 1):
        for a in (0, count[at] // np.maximum(cyc, 1) - 1):
            bad |= (keys.signal_rank + b * step + a * outer) // g != node
    ok &= _per_entry(bad & (op[at] != _PLAIN[Op.PUT]), at, n)
    at = keys.wait_entry  # waits poll the entry's rank, for a count of at least 1
    return ok & _per_entry((keys.wait_rank != rank[at]) | (keys.wait_count < 1), at, n)


def _groups(tasks: tuple, op: np.ndarray, count: np.ndarray,
            table: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per entry: a group's signals, where they cycle, step and cycle a whole number of times, its
    label takes its number where the number steps, a put's ranks do not step, and members that wrap
    (``Step.rotate``) wrap within each cycle (the group, where it does not cycle) with waits and
    chunk that do not step; and each entry's ``rotate`` (0 for a plain task) and cycle (its period,
    else its count: the members' offsets are -rotate .. count - rotate - 1 either way).
    (That its step fits it, count for count, the tables checked as they were made:
    :func:`~mkernel.members.read_regions` its regions, and :func:`~mkernel.signal_table.signal_table`
    its signals and waits.)"""
    ok, rot, cycle = np.ones(len(tasks), bool), np.zeros(len(tasks), np.int64), count.copy()
    at = np.flatnonzero(count > 1)
    steps = [tasks[p].step for p in at]
    period = np.fromiter(map(_PERIOD, steps), np.int64, len(at))
    cycling = period != 0
    whole = np.ones(len(at), bool)  # (cycling: a period of members that divides the count, signals that step)
    if cycling.any():
        moves = np.fromiter(map(bool, map(_SIGNALS, compress(steps, cycling))), bool, int(cycling.sum()))
        whole[cycling] = (period[cycling] > 0) & (count[at[cycling]] % np.maximum(period[cycling], 1) == 0) & moves
        cycle[at[cycling]] = np.maximum(period[cycling], 1)
    numbered = np.fromiter(map(itemgetter(1), map(_LABEL, steps)), np.int64, len(at)) != 0
    braces = np.fromiter(map(contains, map(_LABEL, map(tasks.__getitem__, at.tolist())), repeat("{}")), bool, len(at))
    rot[at] = np.fromiter(map(_ROTATE, steps), np.int64, len(at))
    wraps = np.flatnonzero(rot[at])
    plain = np.fromiter((not (steps[j].chunk or any(steps[j].waits)) for j in wraps.tolist()), bool, len(wraps))
    ok[at] = whole & (braces | ~numbered) & (rot[at] >= 0) & (rot[at] < cycle[at])
    ok[at[wraps]] &= plain
    recs, f, _ = table
    entry = f["entry"]
    return ok & _per_entry((op[entry] == _PLAIN[Op.PUT]) & (recs[:, 6] != 0), entry, len(tasks)), rot, cycle


def _per_entry(bad: np.ndarray, entry: np.ndarray, n: int) -> np.ndarray:
    """Per entry: whether none of its rows is ``bad``."""
    return np.bincount(entry[bad], minlength=n) == 0


def _arity(op: np.ndarray, nread: np.ndarray, nwrite: np.ndarray, table: tuple) -> np.ndarray:
    """Per entry: the op's operand counts and shapes (member 0's: shapes do not step)."""
    recs, f, _ = table
    n = len(op)
    first = np.zeros(n + 1, np.int64)
    np.cumsum(nread + nwrite, out=first[1:])
    rows, cols = recs[:, 3] - recs[:, 2], recs[:, 5] - recs[:, 4]
    gemm, reduce = op == _PLAIN[Op.GEMM], op == _PLAIN[Op.REDUCE]
    pairs = (op == _PLAIN[Op.COPY]) | (op == _PLAIN[Op.PUT])
    ok = np.where(gemm, (nread == 2) & (nwrite == 1), True)
    ok &= np.where(pairs, (nread >= 1) & (nread == nwrite), True)
    ok &= np.where(reduce, (nread >= 1) & (nwrite == 1), True)
    ok &= np.where(op == _PLAIN[Op.NOP], (nread == 0) & (nwrite == 0), True)
    a = first[:-1][gemm & ok]
    ok[gemm & ok] = (cols[a] == rows[a + 1]) & (rows[a] == rows[a + 2]) & (cols[a + 1] == cols[a + 2])
    entry, read = f["entry"], f["read"]
    partner = np.where(pairs[entry], f["k"] + nread[entry], nread[entry]) + first[entry]  # the write it must match
    check = read & (pairs | reduce)[entry] & ok[entry]
    partner = np.where(check, partner, 0)
    bad = check & ((rows != rows[partner]) | (cols != cols[partner]))
    return ok & _per_entry(bad, entry, n)


def _regions(s: Schedule, table: tuple, op: np.ndarray, rank: np.ndarray, count: np.ndarray,
             rot: np.ndarray) -> np.ndarray:
    """Per entry: its extreme members' regions keep the region and locality rules (the first and
    last, or where the members wrap, those either side of the wrap: ``rot`` per entry)."""
    recs, f, codes = table
    entry, read, n, g = f["entry"], f["read"], len(op), s.gpus_per_node
    size = np.zeros((len(codes), 2), np.int64)  # rows, columns per buffer code (0 x 0: unknown, nothing fits)
    size[:len(s.buffers)] = [(b.rows, b.cols) for b in s.buffers]
    inputs = np.zeros(len(codes), bool)
    inputs[:len(s.buffers)] = [b.kind is BufferKind.INPUT for b in s.buffers]
    buf, e_op, e_rank = recs[:, 0], op[entry], rank[entry]
    bad = ~read & inputs[buf]
    put, local = e_op == _PLAIN[Op.PUT], e_op == _PLAIN[Op.GEMM]
    for last in (-rot[entry], count[entry] - 1 - rot[entry]):
        r, r0, r1, c0, c1 = (recs[:, j] + last * recs[:, step] for j, step in ((1, 6), (2, 7), (3, 7), (4, 8), (5, 8)))
        bad |= (r < 0) | (r >= s.world) | (r0 < 0) | (r0 >= r1) | (r1 > size[buf, 0]) | (c0 < 0) | (c0 >= c1)
        bad |= c1 > size[buf, 1]
        bad |= local & (r != e_rank)
        bad |= ~(local | put) & (r // g != e_rank // g)
        bad |= put & np.where(read, r != e_rank, r // g == e_rank // g)
    ok = _per_entry(bad, entry, n)
    writes = put & ~read  # a put is one message: one destination rank (ranks do not step in a put cleared)
    dest = np.full(n, -1, np.int64)
    dest[entry[writes]] = recs[writes, 1]
    return ok & _per_entry(writes & (recs[:, 1] != dest[entry]), entry, n)
