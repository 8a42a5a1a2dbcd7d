"""Fuzz targets shared by tests/hw/test_fuzz.py (a seeded slice in CI) and tools/studies/fuzz.py (10k+ examples
per target, recorded in docs/results/). Each target states its invariant: the input is either
accepted or refused with an :class:`~mkernel.errors.MkernelError`; any other exception is a finding.

- ``scenario``: parsed-TOML tables (known and unknown keys, every TOML value type) -> ``parse``;
  accepted scenarios of a small size are built, validated and planned for hw too.
- ``schedule``: one random edit (region bounds, ranks, buffers, counts, signals, ops, masks, gather
  rows) of a valid small schedule of each op -> ``validate``; a schedule that passes must also be
  planned by the hw lowering or refused there with a ScheduleError.
- ``command``: 48 random bytes -> the ring decoder must round-trip them.
- ``ring garbage``: committed records, in range or garbage, through the native proxy: the good
  prefix executes exactly, nothing after the first bad record does, and no byte outside the
  registered buffers and flags changes.
"""
from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from mkernel import Cluster
from mkernel.builders import get
from mkernel.errors import MkernelError
from mkernel.ir import Op, Signal, Wait
from mkernel.scenario import parse

from .cases import SHAPES, small_workload

# -- scenario tables ------------------------------------------------------------------------------

SCALARS = st.one_of(st.integers(-2**63, 2**63 - 1), st.integers(-3, 70), st.floats(allow_nan=True),
                    st.booleans(), st.text(max_size=8), st.sampled_from(["gemm_ar", "ring_attention", "ib_rc",
                                                                          "efa_srd", "zipf", "ring", "H200"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                      max_leaves=6)
CLUSTER_KEYS = ["nodes", "gpus_per_node", "transport", "notify", "launch_us", "name", "bogus"]
SPEC_KEYS = {"gpu": ["sms", "matmul_tflops", "name"], "nvlink": ["bw_gb_per_s", "latency_us"],
             "nic": ["count", "gbit_per_s", "latency_us"], "proxy": ["batch", "queue_depth", "poll_us"]}
WORKLOAD_KEYS = ["kernel", "m", "n", "k", "tile_m", "tile_n", "chunk_tiles", "causal", "internode", "experts",
                 "topk", "routing", "routing_seed", "baseline", "dtype", "routes", "sms", "nonsense"]


@st.composite
def scenario_tables(draw) -> dict:
    """A valid small scenario, then zero to three edits: a key set to any TOML value, a key
    removed, an unknown key added; one time in ten, not a table at all."""
    if draw(st.integers(0, 9)) == 0:
        return draw(VALUES)
    kernel = draw(st.sampled_from(sorted(SHAPES)))
    raw = {"cluster": {"nodes": draw(st.integers(1, 3)), "gpus_per_node": draw(st.integers(1, 4)),
                       "transport": draw(st.sampled_from(["ib_rc", "efa_srd", "ibgda"]))},
           "workload": {"kernel": kernel, **{k: v * draw(st.integers(1, 2)) if k in "mnk" else v
                                             for k, v in SHAPES[kernel].items()}}}
    for _ in range(draw(st.integers(0, 3))):
        section = draw(st.sampled_from(["cluster", "workload", "top"]))
        table = raw if section == "top" else raw.get(section)
        if not isinstance(table, dict):
            continue  # an earlier edit replaced the section
        keys = {"cluster": CLUSTER_KEYS + [f"{n}.{k}" for n, ks in SPEC_KEYS.items() for k in ks],
                "workload": WORKLOAD_KEYS, "top": ["name", "description", "cluster", "workload", "extra"]}[section]
        key = draw(st.sampled_from(keys))
        action = draw(st.sampled_from(["set", "set", "delete"]))
        if "." in key:  # a key of a spec sub-table
            sub, key = key.split(".")
            if not isinstance(table.setdefault(sub, {}), dict):
                continue
            table = table[sub]
        if action == "delete":
            table.pop(key, None)
        else:
            table[key] = draw(st.one_of(st.integers(-2, 600), VALUES))
    return raw


def scenario_target(raw) -> str:
    """Parse; build, validate and plan what is accepted and small. Returns what happened."""
    from mkernel.hw.lowering import plan

    try:
        sc = parse(raw, "fuzz.toml")
    except MkernelError:
        return "refused"
    w, c = sc.workload, sc.cluster
    if c.world > 8 or max(w.m, w.n, w.k) > 1024 or w.kernel == "moe_dispatch_gemm" and w.m > 512:
        return "accepted"
    try:
        s = get(w.kernel).build(w, c)
        s.validate()
        plan.build(s)
    except MkernelError:
        return "accepted, refused later"
    return "accepted, built and planned"


# -- schedule edits -------------------------------------------------------------------------------

_SCHEDULES: dict = {}


def small_schedule(kernel: str):
    if kernel not in _SCHEDULES:
        _SCHEDULES[kernel] = get(kernel).build(small_workload(kernel), Cluster("t", 2, 2))
    return _SCHEDULES[kernel]


EDITS = ("row0", "row1", "col0", "col1", "rank", "buffer", "wait_count", "wait_rank", "signal_rank", "op",
         "drop_wait", "drop_signal", "mask", "index", "accumulate", "task_rank")


@st.composite
def schedule_edits(draw):
    kernel = draw(st.sampled_from(sorted(SHAPES)))
    s = small_schedule(kernel)
    i = draw(st.integers(0, len(s.tasks) - 1))
    return kernel, i, draw(st.sampled_from(EDITS)), draw(st.integers(-3, 2**31)), draw(st.integers(0, 7))


def _edit(t, what: str, value: int, pick: int):
    regions = t.reads + t.writes
    if what in ("row0", "row1", "col0", "col1", "rank", "buffer") and regions:
        j = pick % len(regions)
        r = regions[j]
        r = dataclasses.replace(r, buffer=f"X{value % 5}") if what == "buffer" else \
            dataclasses.replace(r, **{what: value if what != "rank" else value % 9 - 1})
        regions = regions[:j] + (r,) + regions[j + 1:]
        return dataclasses.replace(t, reads=regions[:len(t.reads)], writes=regions[len(t.reads):])
    if what == "wait_count" and t.waits:
        w = t.waits[pick % len(t.waits)]
        return dataclasses.replace(t, waits=(dataclasses.replace(w, count=value % 9 - 2),) + t.waits[1:])
    if what == "wait_rank" and t.waits:
        w = t.waits[0]
        return dataclasses.replace(t, waits=(Wait(Signal(value % 6 - 1, w.signal.name, w.signal.index), w.count),))
    if what == "signal_rank" and t.signals:
        sig = t.signals[0]
        return dataclasses.replace(t, signals=(Signal(value % 6 - 1, sig.name, sig.index),) + t.signals[1:])
    if what == "op":
        return dataclasses.replace(t, op=list(Op)[value % len(Op)])
    if what == "drop_wait" and t.waits:
        return dataclasses.replace(t, waits=t.waits[1:])
    if what == "drop_signal" and t.signals:
        return dataclasses.replace(t, signals=t.signals[1:])
    if what == "mask":
        return dataclasses.replace(t, mask=tuple(range(value % 4)))
    if what == "index":
        return dataclasses.replace(t, index=tuple((value + k) % 300 - 5 for k in range(pick + 1)))
    if what == "accumulate":
        return dataclasses.replace(t, accumulate=not t.accumulate)
    if what == "task_rank":
        return dataclasses.replace(t, rank=value % 6 - 1)
    return dataclasses.replace(t, label="unchanged")


def schedule_target(edit) -> str:
    from mkernel.hw.lowering import plan

    kernel, i, what, value, pick = edit
    s = small_schedule(kernel)
    tasks = list(s.tasks)
    tasks[i] = _edit(tasks[i], what, value, pick)
    mutated = dataclasses.replace(s, tasks=tuple(tasks))
    try:
        mutated.validate()
    except MkernelError:
        return "refused by validate"
    try:
        plan.build(mutated)
    except MkernelError:
        return "valid, refused by the hw plan"
    return "valid and planned"


# -- ring commands -----------------------------------------------------------------------------

def command_target(raw: bytes) -> str:
    """Decode 48 bytes; re-encoding the decoded command must give the same bytes."""
    from mkernel.hw.lowering import ring

    seq, cmd = ring.decode(raw)
    if ring.encode(cmd, seq) != raw:
        raise AssertionError(f"decode/encode round trip changed {raw.hex()}")
    return "decoded"


# -- garbage in the ring: the native proxy ------------------------------------------------------------

GARBAGE_SIZE, GARBAGE_FLAGS, GARBAGE_GUARD = 512, 8, 256  # registered bytes and flags; guard bytes around them
OFFSETS = st.one_of(st.sampled_from([0, 1, 448, 511, 512, 513, 2**32, 2**63, 2**64 - 1]), st.integers(0, 2**64 - 1))


@st.composite
def ring_garbage(draw) -> list[tuple]:
    """1-8 committed ring records, each either in range or garbage (random fields biased to the
    edges of what is registered): (type, dst_rank, chunk, bytes, src_off, dst_off, epoch)."""
    records = []
    for _ in range(draw(st.integers(1, 8))):
        if draw(st.booleans()):  # in range: a prefix of these executes, overlapping writes included
            nbytes = draw(st.integers(1, GARBAGE_SIZE))
            records.append((draw(st.sampled_from([1, 1, 2])), draw(st.integers(0, 1)), draw(st.integers(0, 7)), nbytes,
                            draw(st.integers(0, GARBAGE_SIZE - nbytes)), draw(st.integers(0, GARBAGE_SIZE - nbytes)),
                            draw(st.integers(0, 2**64 - 1))))
        else:
            records.append((draw(st.sampled_from([1, 1, 2, 0, 3, 65535])), draw(st.sampled_from([0, 1, 2, 65535])),
                            draw(st.one_of(st.integers(0, 9), st.integers(0, 2**32 - 1))),
                            draw(st.one_of(st.sampled_from([0, 1, 64, 511, 512, 513]), st.integers(0, 2**32 - 1))),
                            draw(OFFSETS), draw(OFFSETS), draw(st.integers(0, 2**64 - 1))))
    return records


def _accepted(cmd: tuple, nranks: int) -> bool:
    """The proxy's rule for one record, restated: what it may execute."""
    kind, dst, chunk, nbytes, src_off, dst_off, _ = cmd
    if kind not in (1, 2) or dst >= nranks or chunk >= GARBAGE_FLAGS:
        return False
    return kind == 2 or (nbytes > 0 and src_off <= GARBAGE_SIZE and nbytes <= GARBAGE_SIZE - src_off
                         and dst_off <= GARBAGE_SIZE and nbytes <= GARBAGE_SIZE - dst_off)


def proxy_garbage_target(records: list[tuple]) -> str:
    """Committed garbage records through the real proxy and the fake transport (RC order). The
    records before the first bad one execute exactly; nothing after it does; not one byte outside
    the registered buffers and flags changes (guard bytes around each)."""
    import numpy as np

    from mkernel.hw.runtime.proxy import HostRing, Proxy, ProxyError, Regions

    nranks, g = 2, GARBAGE_GUARD
    rng = np.random.default_rng(len(records))
    src = rng.integers(0, 256, GARBAGE_SIZE + 2 * g, dtype=np.uint8)
    dst = [np.full(GARBAGE_SIZE + 2 * g, 0xA5, np.uint8) for _ in range(nranks)]
    flags = [np.full(GARBAGE_FLAGS + 2 * g // 8, 0xA5A5A5A5A5A5A5A5, np.uint64) for _ in range(nranks)]
    for f in flags:
        f[g // 8: g // 8 + GARBAGE_FLAGS] = 0
    want_src, want_dst, want_flags = src.copy(), [d.copy() for d in dst], [f.copy() for f in flags]
    for cmd in records:  # the oracle: execute in order up to the first record the proxy must refuse
        if not _accepted(cmd, nranks):
            break
        kind, d, chunk, nbytes, src_off, dst_off, epoch = cmd
        if kind == 1:
            want_dst[d][g + dst_off: g + dst_off + nbytes] = src[g + src_off: g + src_off + nbytes]
        want_flags[d][g // 8 + chunk] = epoch
    regions = Regions((src.ctypes.data + g, GARBAGE_SIZE), tuple((d.ctypes.data + g, GARBAGE_SIZE) for d in dst),
                      tuple(f.ctypes.data + g for f in flags), GARBAGE_FLAGS)
    hr = HostRing(16)
    for i, (kind, d, chunk, nbytes, src_off, dst_off, epoch) in enumerate(records):
        hr.records[i] = (i + 1, kind, d, chunk, nbytes, src_off, dst_off, epoch, 0)  # committed
    hr.head[0] = len(records)
    p = Proxy(rank=0, nranks=nranks, ring_ptr=hr.ring_ptr, ctl_ptr=hr.ctl_ptr, capacity=hr.capacity, regions=regions)
    try:
        p.start()
        p.stop(timeout_s=2.0)
        outcome = "every record executed"
    except ProxyError:
        outcome = "refused with an error after the good prefix"
    finally:
        p.close()
    if not ((src == want_src).all() and all((a == b).all() for a, b in zip(dst, want_dst))
            and all((a == b).all() for a, b in zip(flags, want_flags))):
        raise AssertionError(f"memory differs from the oracle after {records}")
    if outcome == "every record executed" and not all(_accepted(c, nranks) for c in records):
        raise AssertionError(f"a bad record raised no error: {records}")
    return outcome
