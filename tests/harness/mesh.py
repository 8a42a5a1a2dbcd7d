"""A host-memory mesh for the proxy's CPU tests: a random send buffer, poisoned receive buffers and
arrival flags for ``nranks`` destinations, the PUTs between them, and the ordering check (no flag
before its data) that the fake transport's write log is judged by."""
from __future__ import annotations

import time

import numpy as np

from mkernel.hw.lowering import ring
from mkernel.hw.runtime.proxy import HostRing, Proxy, Regions

CHUNK = 64  # bytes per chunk in these tests


class Mesh:
    """Host buffers for `nranks` destinations: a random send buffer, receive buffers, arrival flags."""

    def __init__(self, nranks: int, n_flags: int, seed: int):
        rng = np.random.default_rng(seed)
        self.nranks, self.n_flags = nranks, n_flags
        self.src = rng.integers(0, 256, n_flags * CHUNK, dtype=np.uint8)
        self.dst = [rng.integers(0, 256, n_flags * CHUNK, dtype=np.uint8) for _ in range(nranks)]  # poisoned
        self.flags = [np.zeros(n_flags, np.uint64) for _ in range(nranks)]
        self.regions = Regions((self.src.ctypes.data, self.src.nbytes),
                               tuple((d.ctypes.data, d.nbytes) for d in self.dst),
                               tuple(f.ctypes.data for f in self.flags), n_flags)

    def proxy(self, host_ring: HostRing, **kw) -> Proxy:
        return Proxy(rank=0, nranks=self.nranks, ring_ptr=host_ring.ring_ptr, ctl_ptr=host_ring.ctl_ptr,
                     capacity=host_ring.capacity, regions=self.regions, **kw)

    def put(self, dst: int, chunk: int, epoch: int) -> ring.Command:
        return ring.Command(ring.PUT, dst, chunk, CHUNK, chunk * CHUNK, chunk * CHUNK, epoch)


def flag_before_data(log: np.ndarray) -> list[tuple[int, int]]:
    """(dst_rank, chunk) whose flag was written while its data had not landed yet (one op per chunk)."""
    landed, bad = set(), []
    for is_flag, chunk, dst in log.tolist():
        if is_flag and (dst, chunk) not in landed:
            bad.append((dst, chunk))
        elif not is_flag:
            landed.add((dst, chunk))
    return bad


def run_all(mesh: Mesh, **kw) -> Proxy:
    """Fill the ring with one PUT per (rank, chunk), then start the proxy so many ops are in flight."""
    hr = HostRing(mesh.nranks * mesh.n_flags)
    for c in range(mesh.n_flags):
        for d in range(mesh.nranks):
            hr.push(mesh.put(d, c, epoch=5))
    with mesh.proxy(hr, **kw) as p:
        pass
    return p


def call_commands(plan, epoch: int) -> list[ring.Command]:
    """The ring commands ``plan``'s rank pushes in one call, in the kernel's order: its arrival
    SIGNAL to every rank of another node (fused.fused_kernel's call barrier), its puts' commands
    (the aux rows of its PUT tasks), its exit SIGNALs (the last block's)."""
    from mkernel.hw.lowering.layout import OP_CODE, Command, Task
    from mkernel.ir import Op

    node = plan.rank // plan.gpus_per_node
    away = [q for q in range(plan.world) if q // plan.gpus_per_node != node]
    out = [ring.Command(ring.SIGNAL, q, plan.arrive0 + plan.rank, 0, 0, 0, epoch) for q in away]
    for t in plan.tasks[plan.tasks[:, Task.OP] == OP_CODE[Op.PUT]]:
        out += [ring.Command(*(int(row[c]) for c in (Command.KIND, Command.DST_RANK, Command.FLAG, Command.NBYTES,
                                                     Command.SRC_OFF, Command.DST_OFF)), epoch)
                for row in plan.aux[t[Task.A0]:t[Task.A1]]]
    return out + [ring.Command(ring.SIGNAL, q, plan.exit0 + plan.rank, 0, 0, 0, epoch) for q in away]


def replay(plans: list, calls: int, seed: int = 0, wait_s: float = 5.0, **proxy_kw) -> list[str]:
    """Every rank's ring commands of ``calls`` calls through one fake-transport proxy per rank, all
    running at once over shared host heaps and flags (the emulated cluster's proxies without a GPU),
    fresh heap contents every call. Returns what went wrong (empty: every flag a call sets holds
    its epoch, every put's bytes landed, every flag came after the data that its rank's ring put
    before it to that destination)."""
    p0 = plans[0]
    rng = np.random.default_rng(seed)
    nbytes = max(256, p0.placement.heap_bytes)
    heaps = [np.zeros(nbytes, np.uint8) for _ in plans]
    flags = [np.zeros(p0.n_flags, np.uint64) for _ in plans]
    rings = [HostRing(1024) for _ in plans]
    regions = [Regions((heaps[r].ctypes.data, nbytes), tuple((h.ctypes.data, nbytes) for h in heaps),
                       tuple(f.ctypes.data for f in flags), p0.n_flags) for r in range(len(plans))]
    proxies = [Proxy(rank=r, nranks=len(plans), ring_ptr=rings[r].ring_ptr, ctl_ptr=rings[r].ctl_ptr, capacity=1024,
                     regions=regions[r], **proxy_kw).start() for r in range(len(plans))]
    wrong, sent = [], [[] for _ in plans]
    try:
        for epoch in range(1, calls + 1):
            for h in heaps:
                h[:] = rng.integers(0, 256, nbytes, dtype=np.uint8)
            before = [h.copy() for h in heaps]
            cmds = [call_commands(p, epoch) for p in plans]
            for r, cs in enumerate(cmds):
                for c in cs:
                    rings[r].push(c)
                sent[r] += cs
            deadline = time.monotonic() + wait_s
            due = [(c.dst_rank, c.chunk) for cs in cmds for c in cs]
            while any(flags[d][k] < epoch for d, k in due) and time.monotonic() < deadline:
                time.sleep(0.001)
            wrong += [f"call {epoch}: rank {d}'s flag {k} is {flags[d][k]}" for d, k in sorted(set(due))
                      if flags[d][k] != epoch]
            for r, cs in enumerate(cmds):
                for c in cs:
                    if c.type == ring.PUT and not np.array_equal(heaps[c.dst_rank][c.dst_off:c.dst_off + c.bytes],
                                                                 before[r][c.src_off:c.src_off + c.bytes]):
                        wrong.append(f"call {epoch}: rank {r}'s PUT to rank {c.dst_rank} (flag {c.chunk}) did not land")
        for p in proxies:
            p.stop()
    finally:
        for p in proxies:
            p.close()
    for r, p in enumerate(proxies):
        wrong += _flag_order(r, sent[r], p.fake_log())
    return wrong


def _flag_order(rank: int, sent: list[ring.Command], log: np.ndarray) -> list[str]:
    """SIGNALs whose flag was written before the data their rank's ring put ahead of them to that
    destination (a put of several pairs and the call barrier rely on it: hw/lowering/remote.py)."""
    puts: dict[int, int] = {}
    need: dict[tuple[int, int], list[int]] = {}  # (dst, chunk) of a SIGNAL -> PUTs to dst before each one
    for c in sent:
        if c.type == ring.PUT:
            puts[c.dst_rank] = puts.get(c.dst_rank, 0) + 1
        else:
            need.setdefault((c.dst_rank, c.chunk), []).append(puts.get(c.dst_rank, 0))
    wrong, data, seen = [], {}, {}
    for is_flag, chunk, dst in log.tolist():
        if not is_flag:
            data[dst] = data.get(dst, 0) + 1
        elif (dst, chunk) in need:
            k = seen[(dst, chunk)] = seen.get((dst, chunk), -1) + 1
            if data.get(dst, 0) < need[(dst, chunk)][k]:
                wrong.append(f"rank {rank}: SIGNAL flag {chunk} on rank {dst} written after {data.get(dst, 0)} "
                             f"of the {need[(dst, chunk)][k]} puts before it")
    return wrong
