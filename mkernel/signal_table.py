"""Every member's bumps and waits of a grouped schedule as integer arrays, without making the members.

A group's member i bumps its signals moved by i times their step (or by i mod ``period`` and i div
``period`` times their steps and outer steps, or by ``Task.offset(i)`` times where the members wrap,
within each cycle where they cycle: :class:`~mkernel.ir.Step`), and waits on its waits'
signals moved by i times their index step; one record per (entry, signal) and per (entry, wait)
and the entries' counts give them all by index arithmetic. Each (rank, name, index) key becomes one
dense integer. Why: a 2 x 8 GEMM+AR of 32768^2 bumps about 900k member keys, and making them tuples
one task at a time cost a quarter of validate(); its signal counts and its cycle graph read them here.

A signal that does not step is one record standing for all of its group's bumps (``times`` = the
count), as :func:`bump_keys` lists it; a wait that does not step is checked at member 0
alone (every member waits for the same). Read after the per-task rules, which check that every
group's steps fit it.

The tuple form of the same rule is here too (:func:`bump_keys`, :func:`count_homes`): what a group's
members bump, key by key, and where a partial build counts each rank, for the builder and the race
check, which need keys rather than dense numbers.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import chain, compress

import numpy as np

from .errors import ScheduleError
from .ir import Schedule, Task
from .members import Codes, Entries, distinct, int_array, ragged, shared_rows


INDEX_LIMIT = 2 ** 31  # a signal index (every member's) is in -INDEX_LIMIT .. INDEX_LIMIT - 1


def bump_keys(t: Task, first: int = 0, n: int | None = None, home: list[int] | None = None) -> tuple[list, list]:
    """The bumps members ``first .. first+n-1`` of ``t`` (all of them by default) make, keys being
    (rank, name, index): (key, times) of the signals that do not step and the keys, each bumped
    once, of those that do, in member order (so a Counter takes them in one ``update``); each
    rank is counted at ``home[rank]`` where given (a partial build's, :func:`count_homes`). The
    builder's counts (``ScheduleBuilder.bumped``) and the race check (:mod:`mkernel.races`) read
    it; the table below is its array form, and the simulator's ``flat_keys`` its per-member one."""
    n = t.count - first if n is None else n
    steps = t.step.signals if t.count > 1 and t.step.signals else None
    if steps is not None and t.step.period:
        return _cycling_keys(t, first, n, home)
    if steps is None:
        return [((home[g.rank] if home else g.rank, g.name, g.index), n) for g in t.signals], []
    fixed = [((home[g.rank] if home else g.rank, g.name, g.index), n)
             for g, (dk, dx) in zip(t.signals, steps) if not (dk or dx)]
    moving = [(g.rank, g.name, g.index, dk, dx) for g, (dk, dx) in zip(t.signals, steps) if dk or dx]
    offsets = range(first, first + n) if not t.step.rotate else [t.offset(i) for i in range(first, first + n)]
    if len(moving) == 1:
        rank, name, index, dk, dx = moving[0]
        if home:
            return fixed, [(home[rank + i * dk], name, index + i * dx) for i in offsets]
        return fixed, [(rank + i * dk, name, index + i * dx) for i in offsets]
    return fixed, [(home[rank + i * dk] if home else rank + i * dk, name, index + i * dx)
                   for i in offsets for rank, name, index, dk, dx in moving]


def _cycling_keys(t: Task, first: int, n: int, home: list[int] | None) -> tuple[list, list]:
    """:func:`bump_keys` of a group whose signal steps cycle (``Step.period``; each cycle wrapped
    from member p - r on with ``Step.rotate`` = r: the step within it is then b - p)."""
    st, p = t.step, t.step.period
    wrap = p - st.rotate  # (the first member of a cycle past its wrap: none without rotate)
    fixed = [((home[g.rank] if home else g.rank, g.name, g.index), n)
             for g, s, o in zip(t.signals, st.signals, st.outer) if not any(s + o)]
    moving = [(g.rank, g.name, g.index, *s, *o) for g, s, o in zip(t.signals, st.signals, st.outer) if any(s + o)]
    if (home and first == 0 and n == t.count
            and all(dx == ok == 0 and len({home[r + (b - p if b >= wrap else b) * dk] for b in range(min(p, n))}) == 1
                    for r, _, _, dk, dx, ok, _ in moving)):
        # a cycle's members bump one counter where they are counted (every rank of the cycle at one
        # home, the index stepping by cycle only): one key per cycle, as many times as its members
        for a in range(0, n, p):
            fixed += [((home[rank], name, index + a // p * ox), min(p, n - a))
                      for rank, name, index, _, _, _, ox in moving]
        return fixed, []
    keys = []
    for i in range(first, first + n):
        a, b = divmod(i, p)
        if b >= wrap:
            b -= p
        for rank, name, index, dk, dx, ok, ox in moving:
            r = rank + b * dk + a * ok
            keys.append((home[r] if home else r, name, index + b * dx + a * ox))
    return fixed, keys


def count_homes(world: int, gpus_per_node: int, first_nodes: int, local_fold: int) -> list[int] | None:
    """Where a partial build counts the bumps of each rank's signals (None: a full build, each at
    its own): a build of the first nodes (``first_nodes``) counts rank r at r mod those nodes'
    ranks (by the node shift, what other nodes bump there is what the built nodes bump elsewhere),
    one of local rank 0 alone (``local_fold``) then at its node's rank 0 (by the rotation, what
    the node's other ranks bump on rank 0 is what rank 0 bumps on them, renamed)."""
    if not first_nodes and not local_fold:
        return None
    span = first_nodes * gpus_per_node if first_nodes else world
    return [r % span - r % span % local_fold if local_fold else r % span for r in range(world)]


@dataclass(frozen=True, eq=False)
class SignalTable:
    """Bumps and waits of every member of a schedule, keys numbered densely (``keys`` of them).

    Bumps: ``bump_entry``, ``bump_key`` (one record per signal that does not step, first, bumped
    its group's count times, ``fixed_times``; then one per member for one that steps, bumped once:
    no array of ones for the ~900k member bumps of a 2 x 8 GEMM+AR 32768^2 build; both in 32 bits,
    as entries and dense keys fit them: half their pages). Waits: ``wait_entry``, its
    index ``wait_j`` in the entry's waits, the ``wait_member`` (0 for a wait that does not step),
    ``wait_key``, ``wait_count`` and the polled ``wait_rank`` (the signal's own, not its home); in
    the order entry, wait, member. Per signal of each entry (entry after entry, as in
    ``Task.signals``): ``signal_entry``, ``signal_rank``, its ``signal_rank_step`` and
    ``signal_outer_step`` (member 0's, and the group's rank step within a cycle and from one cycle
    to the next, ``Step.outer``: what validate's screen needs). ``count``: each entry's members."""

    keys: int
    count: np.ndarray
    bump_entry: np.ndarray
    bump_key: np.ndarray
    fixed_times: np.ndarray
    wait_entry: np.ndarray
    wait_j: np.ndarray
    wait_member: np.ndarray
    wait_key: np.ndarray
    wait_count: np.ndarray
    wait_rank: np.ndarray
    signal_entry: np.ndarray
    signal_rank: np.ndarray
    signal_rank_step: np.ndarray
    signal_outer_step: np.ndarray

    def bumps(self) -> np.ndarray:
        """How many times each key is bumped, every member's bumps counted."""
        nf = len(self.fixed_times)
        have = np.bincount(self.bump_key[nf:], minlength=self.keys)
        if nf:  # (as float weights, as np.bincount takes them: exact below 2^53)
            have += np.bincount(self.bump_key[:nf], self.fixed_times, self.keys).astype(np.int64)
        return have


def signal_table(s: Schedule, home: list[int] | None = None, entries: Entries | None = None) -> SignalTable:
    """The bumps and waits of every member of ``s``, each rank's keys counted at ``home[rank]``
    where given (a partial build's: :func:`count_homes`); ``entries``: its
    :class:`~mkernel.members.Entries`, where read already. Raises ValueError where a
    group's step does not fit its signals or waits (validate's per-task rules name it)."""
    tasks = s.tasks
    entries = entries or Entries(tasks)
    if not entries.whole:
        raise ValueError("a group without a step")
    names = Codes()
    signal_entry, signal_rank, signal_steps, bumps = _bumps(tasks, entries, names)
    wait_entry, wait_j, member, wait_rank, wait_count, wait = _waits(tasks, entries, names)
    if home is not None:
        home = np.array(home, np.int64)
        np.take(home, bumps[0][1], out=bumps[0][1])
        np.take(home, wait[1], out=wait[1])
    low = min(int(b[2].min(initial=0)) for b in (bumps[0], wait))  # every member's index (row 2), stepped
    high = max(int(b[2].max(initial=0)) for b in (bumps[0], wait))
    if not -INDEX_LIMIT <= low <= high < INDEX_LIMIT:  # (the simulator keys an index in 32 bits: sim/signals.py)
        raise ScheduleError(f"signal indexes from {low} to {high}: from -2^31 to 2^31 - 1 are allowed")
    keys, bump_key, wait_key = _dense(bumps[0], wait)
    return SignalTable(keys, entries.count, bumps[1], bump_key, bumps[2], wait_entry, wait_j, member, wait_key,
                       wait_count, wait_rank, signal_entry, signal_rank, signal_steps[:, 0], signal_steps[:, 2])


def _bumps(tasks: tuple, entries: Entries, names: Codes) -> tuple:
    """Per signal record: its entry, rank and steps (rank, index; outer rank, index); and the bumps
    (their name, rank and index as the rows of one array, which :func:`signal_table` then works in;
    their entry; their times)."""
    count, steps = entries.count, entries.steps
    signals = [t.signals for t in tasks]  # (fields by list comprehensions: mkernel.members.int_array)
    # a builder shares one signals tuple among the entries that bump alike (a 2 x 8 GEMM+AR 32768^2
    # build: 37k tuples of 53k signals for 168k): each distinct tuple is read once, in order of first
    # use (so the names are numbered as met in entry order)
    first, inverse = distinct(signals)
    own = list(map(signals.__getitem__, first.tolist()))
    size = int_array(list(map(len, own)))
    flat = list(chain.from_iterable(own))
    numbers = np.empty((len(flat), 3), np.int64)  # rank, index, name
    numbers[:, 0] = int_array([g.rank for g in flat])  # (list comprehensions: mkernel.members.int_array)
    numbers[:, 1] = int_array([g.index for g in flat])
    numbers[:, 2] = int_array(list(map(names.__getitem__, [g.name for g in flat])))
    per = size[inverse]
    entry, j = ragged(per)
    rank, index, name = np.take(numbers, np.repeat((np.cumsum(size) - size)[inverse], per) + j, axis=0).T
    st = np.zeros((len(entry), 4), np.int64)  # rank, index steps; outer rank, index steps
    period, rotate = np.zeros(len(tasks), np.int64), np.zeros(len(tasks), np.int64)
    moves = [step.signals for step in steps]
    has = np.fromiter(map(bool, moves), bool, len(steps))
    if has.any():
        at = entries.groups[has]
        sts, moves = list(compress(steps, has)), list(compress(moves, has))
        period[at], rotate[at] = entries.period()[has], entries.rotate()[has]
        cycling = period[at] > 0
        outer = [step.outer for step in compress(sts, cycling)]
        if (int_array(list(map(len, moves))) != per[at]).any() or (
                int_array(list(map(len, outer))) != per[at[cycling]]).any():
            raise ValueError("a group's signal steps do not fit its signals")
        st[:, :2] = shared_rows(moves, at, per, entry, j, 2)
        if cycling.any():  # (outer steps: Step.period)
            st[:, 2:] = shared_rows(outer, at[cycling], per, entry, j, 2)
    moving = st.any(axis=1)
    fixed = np.flatnonzero(~moving)
    mv = np.flatnonzero(moving)  # the records that step: one bump per member, made from per-record numbers
    e = entry[mv]
    cnt = count[e]
    _, i = ragged(cnt)  # (a record's numbers per member: np.repeat by cnt, a third of a gather's instructions)
    p = np.where(period[e] > 0, period[e], cnt)  # (no period: i mod count is i, i div count 0)
    wrap = p - rotate[e]  # members that wrap (Step.rotate): b - p from member p - r of each cycle on
    dk, dx, ok, ox = np.take(st, mv, axis=0).T
    nf = len(fixed)
    out = np.empty((3, nf + len(i)), np.int64)  # name, rank, index of every bump
    for row, field in zip(out, (name, rank, index)):  # (a row at a time: a tuple of arrays assigned is read number by number)
        np.take(field, fixed, out=row[:nf])
    out[0, nf:] = np.repeat(name[mv], cnt)
    a, b = None, i  # (no record cycles or wraps: b is i, a 0)
    if (p < cnt).any() or (wrap < p).any():
        pw = np.repeat(p, cnt)
        a, b = np.divmod(i, pw)
        b -= np.where(b >= np.repeat(wrap, cnt), pw, 0)
        del pw
    for row, base, inner, outer in ((out[1, nf:], rank[mv], dk, ok), (out[2, nf:], index[mv], dx, ox)):
        row[:] = np.repeat(base, cnt)  # plus b times the step and a times the outer step, in place (a
        for by, step in ((b, inner), (a, outer)):  # step that no record takes skipped: it adds nothing)
            if by is not None and step.any():
                moved = np.repeat(step, cnt)
                moved *= by
                row += moved
    # each bump's entry, in 32 bits (entries are positions in a tuple: SignalTable); the times of the fixed ones only
    bump_entry = np.empty(len(out[0]), np.int32)
    bump_entry[:nf] = entry[fixed]
    bump_entry[nf:] = np.repeat(e.astype(np.int32), cnt)
    return entry, rank, st, (out, bump_entry, count[entry[fixed]])


def _waits(tasks: tuple, entries: Entries, names: Codes) -> tuple:
    """Per wait record (a wait of member 0, or of every member where it steps): its entry, index in
    the entry's waits, member, polled rank and count; and its key's name, rank, index (the rows of
    one array, which :func:`signal_table` then works in)."""
    count, steps = entries.count, entries.steps
    waits = [t.waits for t in tasks]
    per = int_array(list(map(len, waits)))
    flat = list(chain.from_iterable(waits))
    entry, j = ragged(per)
    signals = [w.signal for w in flat]  # (then each field once, by list comprehensions: mkernel.members.int_array)
    rank, index = int_array([g.rank for g in signals]), int_array([g.index for g in signals])
    need = int_array([w.count for w in flat])
    name = int_array(list(map(names.__getitem__, [g.name for g in signals])))
    dx = np.zeros(len(flat), np.int64)
    moves = [st.waits for st in steps]
    has = np.fromiter(map(bool, moves), bool, len(steps))
    if has.any():
        at = entries.groups[has]
        moves = list(compress(moves, has))
        if (int_array(list(map(len, moves))) != per[at]).any():
            raise ValueError("a group's wait steps do not fit its waits")
        dx = shared_rows(moves, at, per, entry, j, 1)[:, 0]
    times = np.where(dx != 0, count[entry], 1)
    _, member = ragged(times)  # (a record's numbers per member: np.repeat, a third of a gather's instructions)
    rank, dx = np.repeat(rank, times), np.repeat(dx, times)
    key = np.stack((np.repeat(name, times), rank, np.repeat(index, times) + member * dx))
    return np.repeat(entry, times), np.repeat(j, times), member, rank, np.repeat(need, times), key


def _dense(*blocks: np.ndarray) -> tuple:
    """The number of distinct (name, rank, index) columns of ``blocks`` (arrays of those three rows),
    and per block, one integer per column: its place among the distinct ones, 0 up, in order of
    name, then rank, then index. The blocks are worked in (they are scratch): where one number per
    column fits, it is made in the column's name row, in place, and the blocks are not joined (at
    930k columns, each array less is 7 MB of fresh pages)."""
    if not sum(b.shape[1] for b in blocks):
        return 0, *(np.zeros(0, np.int64) for _ in blocks)
    lows, highs = zip(*((min(int(b[f].min(initial=2 ** 63 - 1)) for b in blocks),
                         max(int(b[f].max(initial=-2 ** 63)) for b in blocks)) for f in range(3)))
    spans = [hi - lo + 1 for lo, hi in zip(lows, highs)]
    space = spans[0] * spans[1] * spans[2]
    if space >= 2 ** 62:  # no one number per column: a sort of the three rows, joined
        return _sorted(np.concatenate(blocks, axis=1), [b.shape[1] for b in blocks])
    flats = []
    for b in blocks:  # ((name - low) span + rank - low) span + index - low
        flat = b[0]
        flat -= lows[0]
        flat *= spans[1]
        flat += b[1]
        flat -= lows[1]
        flat *= spans[2]
        flat += b[2]
        flat -= lows[2]
        flats.append(flat)
    if space > 4 * sum(map(len, flats)):  # spread wide: one sort of one key
        distinct, key = np.unique(np.concatenate(flats), return_inverse=True)
        return len(distinct), *np.split(key.reshape(-1), np.cumsum(list(map(len, flats)))[:-1])
    # few possible keys (a 2 x 8 GEMM+AR 32768^2 build: 2.6M for 930k columns): marked and counted, not sorted
    seen = np.zeros(space, bool)
    for flat in flats:
        seen[flat] = True
    marked = np.flatnonzero(seen)  # the keys in order; each numbered where marked (a running count of
    number = np.empty(space, np.int32 if space < 2 ** 31 else np.int64)  # the marks, without summing them all:
    number[marked] = np.arange(len(marked))  # only the marked places are read)
    return len(marked), *(number[flat] for flat in flats)  # (in number's 32 bits where the keys fit them)


def _sorted(rows: np.ndarray, sizes: list[int]) -> tuple:
    """:func:`_dense` of blocks of ``sizes`` columns, joined in ``rows``: a sort of the three rows."""
    name, rank, index = rows
    order = np.lexsort((index, rank, name))
    rows = rows[:, order]
    new = np.ones(len(order), bool)
    new[1:] = (rows[:, 1:] != rows[:, :-1]).any(axis=0)
    key = np.empty(len(order), np.int64)
    key[order] = np.cumsum(new) - 1
    return int(new.sum()), *np.split(key, np.cumsum(sizes)[:-1])
