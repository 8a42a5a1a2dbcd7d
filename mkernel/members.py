"""Every member's regions of a grouped schedule as numpy arrays, without making the members.

A group's member i reads and writes its regions moved by i times their step (:class:`~mkernel.ir.Step`;
regions never cycle, only signals do; where the members wrap, ``Step.rotate``, by ``Task.offset(i)``
times), so one record per (entry, region) and the entries' counts give every member's regions by
index arithmetic. Why: a 2 x 8 GEMM+AR of 32768^2 has about a
million members, and making each one a Task cost most of validate() and of the hazard tracker's
set-up. The output-coverage rule (:mod:`mkernel.coverage`) and the hazard tracker's grids
(:mod:`mkernel.sim.cellgrid`) both read their regions from here.
"""
from __future__ import annotations

import struct
from itertools import chain, compress, repeat
from operator import is_

import numpy as np

from .ir import Schedule

FIELDS = 11  # a region record: buffer code, rank, row0, row1, col0, col1, rank, row and column steps, rotate, cycle
RegionTable = tuple[np.ndarray, dict[str, np.ndarray], dict[str, int]]  # what read_regions returns


_PACK = {np.dtype(np.int32): "i", np.dtype(np.int64): "q"}  # struct's codes of 4 and 8 bytes (standard sizes)
_CHUNK = 8192  # regions read at a time (:func:`_records`): their objects, about 0.6 MB, stay in the cache


class Codes(dict):
    """Names numbered as met (buffer codes: a schedule's buffers by position, then any other name)."""

    def __missing__(self, name: str) -> int:
        code = self[name] = len(self)
        return code


class Entries:
    """What several of validate's phases read of every entry of a schedule, read once: each pass
    over a 2 x 8 GEMM+AR 32768^2 build's 53k entries costs 2-5 ms, and the region table, the
    signal table and the screen each read the counts, the groups' steps and their period and rotate.
    ``count``: each entry's members; ``groups``: the entries of more than one, and ``steps`` theirs
    (None where a group has none)."""

    def __init__(self, tasks: tuple) -> None:
        self.tasks = tasks
        self.count = int_array([t.count for t in tasks])
        self.groups = np.flatnonzero(self.count > 1)
        self.steps = [tasks[i].step for i in self.groups.tolist()]  # (fields by list comprehensions: int_array)
        self.whole = all(self.steps)  # (a Step is always true: this finds a None without calling Step.__eq__)
        self._period = self._rotate = None

    def period(self) -> np.ndarray:
        """Each group's ``Step.period`` (every group has a step)."""
        if self._period is None:
            self._period = int_array([st.period for st in self.steps])
        return self._period

    def rotate(self) -> np.ndarray:
        """Each group's ``Step.rotate`` (every group has a step)."""
        if self._rotate is None:
            self._rotate = int_array([st.rotate for st in self.steps])
        return self._rotate


def read_regions(s: Schedule) -> RegionTable:
    """Every region of every entry of ``s`` (``reads + writes``, entry after entry) as one record of
    :data:`FIELDS` numbers: its steps are its group's ``Step.regions`` (zero where it has none),
    its ``Step.rotate`` and the cycle its members wrap in (the period, or the count; 0 where they
    do not wrap: :func:`offsets`), its buffer is coded by position in ``s.buffers`` (a name not there is
    numbered on). Read in bulk, about 0.3 us a region where a call per region cost 1 us (a 2 x 8
    GEMM+AR 32768^2 build has 900k), as 32-bit numbers where they fit. ``validate()`` returns the
    table it read, so a backend that reads the same regions (the simulator's hazard grids) is handed
    it rather than reading the schedule again. Returns the records (one row each); per record its
    ``entry``, its index ``k`` in ``reads + writes`` and whether it is a ``read``; and the codes by name."""
    return region_table(s, Entries(s.tasks))


def region_table(s: Schedule, entries: Entries) -> RegionTable:
    """:func:`read_regions` of ``s``, whose :class:`Entries` were read already."""
    tasks = s.tasks
    codes = Codes((b.name, i) for i, b in enumerate(s.buffers))
    reads, writes = [t.reads for t in tasks], [t.writes for t in tasks]
    nread = int_array(list(map(len, reads)))
    per = nread + int_array(list(map(len, writes)))
    # every region, entry by entry, reads then writes: listed once and read twice (walking the nested
    # tuples costs more than the list, about 8 MB at a million regions)
    regions = list(chain.from_iterable(chain.from_iterable(zip(reads, writes))))
    try:  # 32-bit where every number fits (always, but for buffers past 2^31 rows or columns): half the memory
        recs = _records(regions, codes, np.int32)
    except OverflowError:
        recs = _records(regions, codes, np.int64)
    del regions
    entry, k = ragged(per)
    counts, groups, steps = entries.count, entries.groups, entries.steps
    moves = [st.regions for st in steps] if entries.whole else [st.regions if st else (None,) for st in steps]
    size = int_array(list(map(len, moves)))
    has = size > 0  # (a group without a step counts as one that moves: its (None,) has one item)
    at = groups[has]
    bad = size[has] != per[at]
    if not entries.whole:
        bad |= np.fromiter(map(is_, compress(steps, has), repeat(None)), bool, len(at))
    bad = np.flatnonzero(bad)
    if bad.size:  # the first group whose step is missing or does not fit
        p = int(at[bad[0]])
        raise ValueError(f"{tasks[p].describe()}: its step does not fit its {per[p]} regions")
    if at.size:
        table, rows = shared_table(list(compress(moves, has)), at, per, entry, k, 3)
        rotate = entries.rotate()[has]
        cycle = np.where(rotate > 0, counts[at], 0)  # (field 10's bound: a cycle is at most the group)
        # (the table's numbers are the records' steps, each distinct item's taken by the entries that share it:
        # their bounds, and the steps taken in the records' own numbers, half a 64-bit take's pages)
        if recs.dtype != np.int64 and max(-table.min(initial=0), table.max(initial=0),
                                          cycle.max(initial=0)) >= 2 ** 31:
            recs = recs.astype(np.int64)
        recs[:, 6:9] = np.take(table.astype(recs.dtype, copy=False), rows, axis=0)
        del table, rows
        if rotate.any():
            period = entries.period()[has]
            at_rotate = np.zeros((len(tasks), 2), recs.dtype)  # per entry: its rotate and the cycle its members wrap in
            at_rotate[at, 0] = rotate
            at_rotate[at, 1] = np.where(rotate > 0, np.where(period > 0, period, counts[at]), 0)
            recs[:, 9:11] = np.repeat(at_rotate, per, axis=0)  # (records lie entry after entry)
    fields = {"entry": entry, "k": k, "read": k < np.repeat(nread, per)}
    for a in (recs, *fields.values()):
        a.flags.writeable = False
    return recs, fields, dict(codes)


def _records(regions: list, codes: Codes, dtype: type) -> np.ndarray:
    """The ``regions`` as records (buffer code and bounds; steps 0), of ``dtype`` (OverflowError
    where a number does not fit it). Each field is read by a list comprehension, whose attribute
    reads the interpreter specializes to a slot load: half the instructions of ``attrgetter``
    mapped over them (a 2 x 8 GEMM+AR 32768^2 build's 438k regions: 0.6 G of 1.2 G). The fields
    are read a chunk of regions at a time, all six while its objects are in the cache (six passes
    over all 438k, 30 MB of objects, took longer than the one pass of ``attrgetter``)."""
    n = len(regions)
    recs = np.zeros((n, FIELDS), dtype)
    known = dict(codes)  # (a plain dict's lookup is specialized too; a name not in it is numbered on, as met)
    for lo in range(0, n, _CHUNK):
        part = regions[lo:lo + _CHUNK]
        rows = recs[lo:lo + len(part)]
        try:
            rows[:, 0] = int_array([known[r.buffer] for r in part], dtype)
        except KeyError:
            rows[:, 0] = int_array(list(map(codes.__getitem__, [r.buffer for r in part])), dtype)
            known = dict(codes)
        rows[:, 1] = int_array([r.rank for r in part], dtype)
        rows[:, 2] = int_array([r.row0 for r in part], dtype)
        rows[:, 3] = int_array([r.row1 for r in part], dtype)
        rows[:, 4] = int_array([r.col0 for r in part], dtype)
        rows[:, 5] = int_array([r.col1 for r in part], dtype)
    return recs


def int_array(values: list, dtype: type = np.int64) -> np.ndarray:
    """``np.fromiter(values, dtype, len(values))`` of a list, for ``dtype`` int32 or int64: packed by
    :func:`struct.pack_into` (half of fromiter's instructions a number, which convert each through
    numpy's scalar machinery). Exact: struct packs every int (a bool, a numpy integer) that fits as
    its own value, as fromiter does; where one does not fit or is no integer, it refuses
    (struct.error), and fromiter makes the array, so it converts, or raises, as it always did."""
    n = len(values)
    out = np.empty(n, dtype)
    try:
        struct.pack_into(f"={n}{_PACK[np.dtype(dtype)]}", out, 0, *values)
    except struct.error:
        return np.fromiter(values, dtype, n)
    return out


def distinct(items: list) -> tuple[np.ndarray, np.ndarray]:
    """The first position of each distinct object of ``items`` (by identity), in order of first
    occurrence, and each item's index among them."""
    ids = int_array(list(map(id, items)))
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    order = np.argsort(first)
    number = np.empty(len(order), np.int64)
    number[order] = np.arange(len(order))
    return first[order], number[inverse.reshape(-1)]


def shared_rows(items: list[tuple], at: np.ndarray, per: np.ndarray, entry: np.ndarray, k: np.ndarray,
                width: int) -> np.ndarray:
    """Per record of a table laid entry after entry (``per[e]`` records of entry e; record r is record
    ``k[r]`` of entry ``entry[r]``): the numbers that ``items[j]``, a tuple of ``per[at[j]]`` tuples
    of ``width`` ints (or of ints, width 1), gives record k of entry ``at[j]``; zeros where the entry
    is not in ``at``. Each tuple object is read once, however many items it is: a builder shares one
    step tuple among the groups that step alike (a 2 x 8 GEMM+AR 32768^2 build has 150k groups and
    a few dozen kinds of step). The distinct tuples are read in a table after ``max(per)`` rows of
    zeros, where the records of an entry not in ``at`` point, so every record is one row taken."""
    table, rows = shared_table(items, at, per, entry, k, width)
    return np.take(table, rows, axis=0)  # (take: a few times quicker than [rows] on 2-D arrays)


def shared_table(items: list[tuple], at: np.ndarray, per: np.ndarray, entry: np.ndarray, k: np.ndarray,
                 width: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`shared_rows` as the table it takes from (its zeros, then every distinct item's numbers,
    each read by some record) and the row each record takes."""
    if not items:
        return np.zeros((1, width), np.int64), np.zeros(len(entry), np.int64)
    first, inverse = distinct(items)
    size = per[at[first]]
    pad = int(per.max())
    numbers = chain.from_iterable(map(items.__getitem__, first.tolist()))
    table = np.zeros((pad + int(size.sum()), width), np.int64)
    table[pad:] = np.fromiter(chain.from_iterable(numbers) if width > 1 else numbers, np.int64,
                              width * (len(table) - pad)).reshape(-1, width)
    start = np.zeros(len(per), np.int64)  # per entry: its first row in the table
    start[at] = (pad + np.cumsum(size) - size)[inverse]
    rows = np.repeat(start, per)
    rows += k
    return table, rows


def ragged(sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For items of ``sizes`` parts each: every part's item and its index within the item."""
    which = np.repeat(np.arange(len(sizes)), sizes)
    start = np.zeros(len(sizes), np.int64)
    np.cumsum(sizes[:-1], out=start[1:])
    # (an item's number on each of its parts: np.repeat, a third of the instructions of start[which])
    return which, np.arange(len(which), dtype=np.int64) - np.repeat(start, sizes)


def entry_rows(per: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """In a table of ``per[e]`` rows per entry e, laid out entry after entry: the rows of the entries
    ``at``, and which of ``at`` each row belongs to."""
    which, j = ragged(per[at])
    return np.repeat((np.cumsum(per) - per)[at], per[at]) + j, which


def member_slots(per_entry: list[int] | np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows of :func:`member_rows`, one per member region, as two numbers each: its record
    (index into records laid entry by entry, ``per_entry`` each; ``counts`` the entries' member
    counts) and its member's index in its entry; with the first row of each entry (and the total).
    A reader that needs a row's bounds only where its record steps (the hazard grids) takes the
    record's own elsewhere and never lists every row's bounds: at 2.3M rows, each array listed
    is a few ms, and as much again in first-touch page faults. Both columns are made by a cumsum
    over the rows (the record goes up by one within a member and jumps back at the next)."""
    n = np.asarray(per_entry, np.int64)
    base = np.zeros(len(n) + 1, np.int64)
    np.cumsum(n * counts, out=base[1:])
    live = np.flatnonzero(n)
    block_entry, block_i = ragged(counts[live])  # one block per member (of an entry with rows)
    size = n[live][block_entry]  # rows per block
    first = (np.cumsum(n) - n)[live][block_entry]  # each block's first record
    rec = np.ones(int(base[-1]), np.int64)
    if len(size):
        jump = first.copy()
        jump[1:] -= first[:-1] + size[:-1] - 1
        rec[np.cumsum(size) - size] = jump
    np.cumsum(rec, out=rec)
    return base, rec, np.repeat(block_i, size)


def member_rows(recs: list[tuple] | np.ndarray, per_entry: list[int] | np.ndarray,
                counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict]:
    """Rows, one per member region, from region records (entry by entry, ``per_entry`` records
    each; ``counts`` the entries' member counts), in the expanded schedule's order: entry after
    entry, member after member, each member's regions in record order. Returns the first row of
    each entry (and the total), the rows per member, and per row: its ``buffer``, ``rank`` and
    bounds (the record's plus its steps times the member's :func:`offsets`), its
    ``entry``, ``member`` index and ``record`` (index into ``recs``). Every row listed: the tests'
    reference for :func:`member_slots` and the hazard grids, which list rows only where they must."""
    n = np.array(per_entry, np.int64)
    base, rec, i = member_slots(n, counts)
    cols = np.asarray(recs, np.int64).reshape(-1, FIELDS).T
    entry = np.repeat(np.arange(len(n)), n)[rec]
    rot = cols[9][rec]
    o = offsets(i, rot, cols[10][rec]) if rot.any() else i
    dk, dr, dc = (cols[f][rec] * o for f in (6, 7, 8))
    fields = {"buffer": cols[0][rec], "rank": cols[1][rec] + dk, "row0": cols[2][rec] + dr,
              "row1": cols[3][rec] + dr, "col0": cols[4][rec] + dc, "col1": cols[5][rec] + dc,
              "entry": entry, "member": i, "record": rec}
    return base, n, fields


def offsets(i: np.ndarray, rotate: np.ndarray, cycle: np.ndarray) -> np.ndarray:
    """:meth:`~mkernel.ir.Task.offset` of members ``i`` whose records have ``rotate`` and ``cycle``
    (fields 9 and 10): i, or i - cycle where the member is past its cycle's wrap (rotate 0: never)."""
    return i - np.where((rotate > 0) & (i % np.maximum(cycle, 1) >= cycle - rotate), cycle, 0)
