"""A host-memory mesh for the proxy's CPU tests: a random send buffer, poisoned receive buffers and
arrival flags for ``nranks`` destinations, the PUTs between them, and the ordering check (no flag
before its data) that the fake transport's write log is judged by."""
from __future__ import annotations

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
