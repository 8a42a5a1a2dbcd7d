"""validate()'s per-task rules, screened in bulk: the entries that certainly keep every one.

The per-task rules (:mod:`mkernel.validation`) cost a few microseconds of Python per entry, and a 2 x 8
GEMM+AR 32768^2 build has 188k entries (1.7 s). Most entries are plain: GEMM and attention tiles,
copies, reductions, puts, norms and nops, whose rules are comparisons of a few integers. :func:`cleared`
decides those comparisons for every entry at once on numpy arrays (regions from
:func:`mkernel.members.read_regions`); validate then runs the rules in Python on the entries not cleared
only, in order. So its verdict and message are the Python rules' own: an entry cleared here would pass
them, and every other entry still meets them.

What clears an entry (each a superset of what the Python rules check for it): its id is its position;
its op is a GEMM, attention, norm, copy, reduce, put or nop, with no gather index and no mask (an
attention's: none, or (q0, k0) with k0 <= q0); a group (``count`` > 1) has a
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

from itertools import compress
from operator import attrgetter

import numpy as np

from .ir import BufferKind, Op, Role, Schedule
from .members import Entries, entry_rows, int_array
from .signal_table import SignalTable

_PLAIN = {Op.GEMM: 0, Op.COPY: 1, Op.REDUCE: 2, Op.PUT: 3, Op.NOP: 4, Op.ATTN: 5, Op.NORM: 6}  # the ops screened here
_OTHER = len(_PLAIN)
_LOCAL = [_PLAIN[Op.GEMM], _PLAIN[Op.ATTN], _PLAIN[Op.NORM]]  # the ops that touch only their own rank's memory
_OWN, _PUT, _NODE = 0, 1, 2  # where an entry's regions may lie (_regions): its rank, another node, its node
_ROLES = {role: i for i, role in enumerate(Role)}
_SIGNALS = attrgetter("signals")


def cleared(s: Schedule, table: tuple, keys: SignalTable, entries: Entries | None = None) -> np.ndarray:
    """Per entry of ``s``: whether it certainly keeps every per-task rule (see the module);
    ``table`` is :func:`mkernel.members.read_regions` of ``s``, ``keys`` its
    :func:`~mkernel.signal_table.signal_table`, ``entries`` its :class:`~mkernel.members.Entries`
    where read already."""
    tasks, n, g = s.tasks, len(s.tasks), s.gpus_per_node
    count = keys.count
    # (each field by a list comprehension, whose attribute reads are slot loads: mkernel.members.int_array)
    tid, rank, launch = (int_array([t.id for t in tasks]), int_array([t.rank for t in tasks]),
                         int_array([t.launch for t in tasks]))
    plain, roles = _PLAIN, _ROLES
    op = int_array([plain.get(t.op, _OTHER) for t in tasks])
    role = int_array([roles[t.role] for t in tasks])
    entry, read = table[1]["entry"], table[1]["read"]  # (one record per region: reads, then writes)
    per = np.bincount(entry, minlength=n)
    nread = np.bincount(entry, read, minlength=n).astype(np.int64)
    ok = (tid == np.arange(n)) & (op < _OTHER) & (count >= 1) & (0 <= rank) & (rank < s.world)
    ok &= int_array([len(t.index) for t in tasks]) == 0
    ok &= _masks(tasks, op)
    groups, rot, cycle = _groups(tasks, entries or Entries(tasks), op, count, table, per)
    ok &= groups
    budget = np.array([[dict(launch.sms).get(r, 0) > 0 for r in Role] for launch in s.launches]
                      or [[False] * len(Role)])
    budget[list(s.elided)] = False
    ok &= (0 <= launch) & (launch < len(s.launches))
    ok &= budget[np.where(ok, launch, 0), role]
    ok &= _arity(op, nread, per - nread, table)
    ok &= _regions(s, table, op, rank, count, rot, per)
    at = keys.signal_entry  # a signal's extreme members stay on the entry's node (but a put's, which may not):
    # its rank is affine in the step within a cycle (-rot .. cycle - rot - 1) and the cycle (0 .. count / cycle - 1),
    # so extreme at the corners; a rank r is on node q where q g <= r < q g + g (no division)
    low = rank[at] // g * g
    bad = _outside(keys.signal_rank, low, g)
    steps = np.flatnonzero((keys.signal_rank_step != 0) | (keys.signal_outer_step != 0))  # (others: member 0's rank)
    at, low, corners = at[steps], low[steps], np.zeros(len(steps), bool)
    rank0, step, outer, r, cyc = (keys.signal_rank[steps], keys.signal_rank_step[steps], keys.signal_outer_step[steps],
                                  rot[at], cycle[at])
    for b in (-r, cyc - r - 1):
        for a in (0, count[at] // np.maximum(cyc, 1) - 1):
            corners |= _outside(rank0 + b * step + a * outer, low, g)
    bad[steps] = corners  # (exact: the corners include member 0, whose rank is the only one the others have)
    ok &= _per_entry(bad & (op[keys.signal_entry] != _PLAIN[Op.PUT]), keys.signal_entry, n)
    at = keys.wait_entry  # waits poll the entry's rank, for a count of at least 1
    return ok & _per_entry((keys.wait_rank != rank[at]) | (keys.wait_count < 1), at, n)


def _masks(tasks: tuple, op: np.ndarray) -> np.ndarray:
    """Per entry: no causal mask, or an attention's (q0, k0) of ints with k0 <= q0 (the few masked
    entries, in Python; any other mask is left to the rule, whose error it then is)."""
    masks = [t.mask for t in tasks]
    size = int_array(list(map(len, masks)))
    attn = op == _PLAIN[Op.ATTN]
    ok = (size == 0) | (attn & (size == 2))
    two = np.flatnonzero(attn & (size == 2)).tolist()
    ok[two] = [type(q0) is int and type(k0) is int and k0 <= q0 for q0, k0 in (masks[i] for i in two)]
    return ok


def _outside(rank: np.ndarray, low: np.ndarray, g: int) -> np.ndarray:
    """Whether each ``rank`` lies off the node of ranks ``low .. low + g - 1`` (rank // g != low // g)."""
    return (rank < low) | (rank >= low + g)


def _groups(tasks: tuple, entries: Entries, op: np.ndarray, count: np.ndarray, table: tuple,
            per: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per entry: a group's signals, where they cycle, step and cycle a whole number of times, its
    label takes its number where the number steps, a put's ranks do not step, and members that wrap
    (``Step.rotate``) wrap within each cycle (the group, where it does not cycle) with waits and
    chunk that do not step; and each entry's ``rotate`` (0 for a plain task) and cycle (its period,
    else its count: the members' offsets are -rotate .. count - rotate - 1 either way).
    (That its step fits it, count for count, the tables checked as they were made:
    :func:`~mkernel.members.read_regions` its regions, and :func:`~mkernel.signal_table.signal_table`
    its signals and waits.) ``per``: each entry's records in ``table``."""
    ok, rot, cycle = np.ones(len(tasks), bool), np.zeros(len(tasks), np.int64), count.copy()
    # (every group has a step here: the signal table was read)
    at, steps = entries.groups, entries.steps
    period = entries.period()
    cycling = period != 0
    whole = np.ones(len(at), bool)  # (cycling: a period of members that divides the count, signals that step)
    if cycling.any():
        moves = np.fromiter(map(bool, map(_SIGNALS, compress(steps, cycling))), bool, int(cycling.sum()))
        whole[cycling] = (period[cycling] > 0) & (count[at[cycling]] % np.maximum(period[cycling], 1) == 0) & moves
        cycle[at[cycling]] = np.maximum(period[cycling], 1)
    numbered = int_array([st.label[1] for st in steps]) != 0
    braces = np.fromiter(["{}" in tasks[i].label for i in at.tolist()], bool, len(at))
    rot[at] = entries.rotate()
    wraps = np.flatnonzero(rot[at])
    plain = np.fromiter((not (steps[j].chunk or any(steps[j].waits)) for j in wraps.tolist()), bool, len(wraps))
    ok[at] = whole & (braces | ~numbered) & (rot[at] >= 0) & (rot[at] < cycle[at])
    ok[at[wraps]] &= plain
    puts = at[op[at] == _PLAIN[Op.PUT]]  # a put group's regions do not step by rank
    if len(puts):
        rows, which = entry_rows(per, puts)
        ok[puts] &= np.bincount(which, table[0][rows, 6] != 0, len(puts)) == 0
    return ok, rot, cycle


def _per_entry(bad: np.ndarray, entry: np.ndarray, n: int) -> np.ndarray:
    """Per entry: whether none of its rows is ``bad`` (np.compress: a few times quicker than [bad])."""
    return np.bincount(np.compress(bad, entry), minlength=n) == 0


def _arity(op: np.ndarray, nread: np.ndarray, nwrite: np.ndarray, table: tuple) -> np.ndarray:
    """Per entry: the op's operand counts and shapes (member 0's: shapes do not step)."""
    recs, f, _ = table
    n = len(op)
    per = nread + nwrite
    first = np.zeros(n + 1, np.int64)
    np.cumsum(per, out=first[1:])
    rows, cols = recs[:, 3] - recs[:, 2], recs[:, 5] - recs[:, 4]
    gemm, reduce = op == _PLAIN[Op.GEMM], op == _PLAIN[Op.REDUCE]
    attn, norm = op == _PLAIN[Op.ATTN], op == _PLAIN[Op.NORM]
    pairs = (op == _PLAIN[Op.COPY]) | (op == _PLAIN[Op.PUT])
    ok = np.where(gemm, (nread == 2) & (nwrite == 1), True)
    ok &= np.where(pairs, (nread >= 1) & (nread == nwrite), True)
    ok &= np.where(reduce, (nread >= 1) & (nwrite == 1), True)
    ok &= np.where(op == _PLAIN[Op.NOP], (nread == 0) & (nwrite == 0), True)
    ok &= np.where(attn, (nread == 3) & (nwrite == 2), True)
    ok &= np.where(norm, (nread == 2) & (nwrite == 2), True)
    a = first[:-1][gemm & ok]
    ok[gemm & ok] = (cols[a] == rows[a + 1]) & (rows[a] == rows[a + 2]) & (cols[a + 1] == cols[a + 2])
    # attn: q (q x d), k (kr x d), v (kr x d) -> acc (q x d), stats (q x 2)
    a = first[:-1][attn & ok]
    q, d = rows[a], cols[a]
    ok[attn & ok] = ((cols[a + 1] == d) & (cols[a + 2] == d) & (rows[a + 1] == rows[a + 2]) & (rows[a + 3] == q)
                     & (cols[a + 3] == d) & (rows[a + 4] == q) & (cols[a + 4] == 2))
    # norm: acc (q x d), stats (q x 2) -> out (q x d), lse (q x 1)
    a = first[:-1][norm & ok]
    q, d = rows[a], cols[a]
    ok[norm & ok] = ((rows[a + 1] == q) & (cols[a + 1] == 2) & (rows[a + 2] == q) & (cols[a + 2] == d)
                     & (rows[a + 3] == q) & (cols[a + 3] == 1))
    entry, read = f["entry"], f["read"]
    # a read of a copy, put or reduce that passed the counts must match its write in shape: per record,
    # an entry's numbers are np.repeat(those, per) (the records lie entry after entry)
    check = np.flatnonzero(read & np.repeat((pairs | reduce) & ok, per))
    base = np.repeat(first[:-1] + nread, per)[check]  # (the entry's first write)
    partner = np.where(np.repeat(pairs, per)[check], base + f["k"][check], base)  # the write it must match
    bad = (rows[check] != rows[partner]) | (cols[check] != cols[partner])
    return ok & _per_entry(bad, entry[check], n)


def _regions(s: Schedule, table: tuple, op: np.ndarray, rank: np.ndarray, count: np.ndarray,
             rot: np.ndarray, per: np.ndarray) -> np.ndarray:
    """Per entry: its extreme members' regions keep the region and locality rules (the first and
    last, or where the members wrap, those either side of the wrap: ``rot`` per entry; ``per``: each
    entry's records).

    A record's numbers at member offset o are its own plus o times its steps, so each is least and
    most at the two extremes: a bound that both extremes keep is one that the lesser and the greater
    of the two keep, and a rank lies on a node (an interval of ranks) at both extremes where the
    lesser and the greater do. A region's extent does not step, so it is non-empty at one member
    where it is at every member. Only a put's write, which must leave its node at both extremes,
    needs the two extremes themselves (and puts are few). The records' fields are read once as rows
    of 64-bit numbers (the table's columns are strided, and mostly 32-bit: each operation on them
    converted them again), one bound's at a time (the rows', the columns', the ranks': all nine rows
    at once, with their spans, were 67 of the 74 MB that the screen added on the 2 x 8 GEMM+AR
    32768^2 row), and an entry's numbers are put on its records only where records need them."""
    recs, f, codes = table
    entry, read, n, g = f["entry"], f["read"], len(op), s.gpus_per_node
    size = np.zeros((len(codes), 2), np.int64)  # rows, columns per buffer code (0 x 0: unknown, nothing fits)
    size[:len(s.buffers)] = [(b.rows, b.cols) for b in s.buffers]
    inputs = np.zeros(len(codes), bool)
    inputs[:len(s.buffers)] = [b.kind is BufferKind.INPUT for b in s.buffers]
    cols = recs[:, :9].T  # (each field read once, when needed, as a row of 64-bit numbers)
    buf = cols[0].astype(np.int64)
    first, last = np.repeat(-rot, per), np.repeat(count - 1 - rot, per)  # the extreme members' offsets

    def span(step: np.ndarray) -> tuple[np.ndarray | int, np.ndarray | int]:  # (the least and the most of the two moves)
        if not step.any():
            return 0, 0
        a, b = first * step, last * step
        return np.minimum(a, b), np.maximum(a, b)

    bad = ~read & np.take(inputs, buf)
    for at, step, limit in ((2, 7, size[:, 0]), (4, 8, size[:, 1])):  # rows, then columns (then freed)
        lo, hi = cols[at].astype(np.int64), cols[at + 1].astype(np.int64)
        least, most = span(cols[step].astype(np.int64))
        bad |= (lo + least < 0) | (lo >= hi) | (hi + most > np.take(limit, buf))
    del buf, lo, hi, least, most
    r, dk = cols[1].astype(np.int64), cols[6].astype(np.int64)
    klo, khi = span(dk)
    kind = np.where(op == _PLAIN[Op.PUT], _PUT, np.where(np.isin(op, _LOCAL), _OWN, _NODE)).astype(np.int8)
    e_kind, e_rank = np.repeat(kind, per), np.repeat(rank, per)
    put, local = e_kind == _PUT, e_kind == _OWN  # (local: a GEMM, attention or norm: its own rank only)
    low, high = r + klo, r + khi  # the rank's extremes
    bad |= (low < 0) | (high >= s.world)
    own = (low == e_rank) & (high == e_rank)
    node = np.repeat(rank // g * g, per)  # the entry's node's first rank
    bad |= local & ~own
    bad |= (e_kind == _NODE) & ((low < node) | (high >= node + g))
    bad |= put & read & ~own
    writes = np.flatnonzero(put & ~read)  # (a put's writes: off the node at each extreme)
    for at in (r[writes] + first[writes] * dk[writes], r[writes] + last[writes] * dk[writes]):
        bad[writes] |= (at >= node[writes]) & (at < node[writes] + g)
    ok = _per_entry(bad, entry, n)
    writes = put & ~read  # a put is one message: one destination rank (ranks do not step in a put cleared)
    dest = np.full(n, -1, np.int64)
    dest[entry[writes]] = r[writes]
    return ok & _per_entry(writes & (r != np.repeat(dest, per)), entry, n)
