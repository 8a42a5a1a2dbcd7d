"""Network transports between nodes, set up from Python: one endpoint per rank, its address published
through the torch.distributed store, its peers connected, and the regions the proxy checks every
command against taken from the peers' own registrations.

The data path is native (``csrc/transport_verbs_rc.c``, ``transport_verbs_srd.c``, ``transport_ofi.c``,
behind ``csrc/mk_net.h``); this module only creates, exchanges and connects. A rank registers one
region (the layout every rank shares: arrival flags, receive area, send area), so a peer's
destination addresses are its published base plus the shared offsets, and the proxy's bounds are
exactly what the peer registered.

Use::

    ep, regions = open_network("verbs_rc", store=store, tag="ctx0", rank=r, world=w, gpus_per_node=8,
                               n_flags=n, region=Region(base, nbytes, recv_off, recv_bytes, send_off,
                                                        send_bytes, cuda_device=0))
    proxy = Proxy(rank=r, nranks=w, ..., regions=regions, transport=ep).start()
"""
from __future__ import annotations

import ctypes
import dataclasses
import datetime
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from mkernel.errors import BackendUnavailable, InputError

from ..lowering import ring
from . import native, nics
from .proxy import Proxy, ProxyError, Regions

NETWORK = ("verbs_rc", "verbs_srd", "ofi")
PUBLISH = {"store": ring.PUBLISH_STORE, "loopback": ring.PUBLISH_LOOPBACK}


@dataclass(frozen=True)
class NetOptions:
    """How one rank's network endpoint is made. Defaults suit a real NIC; "" and -1 are auto.

    - ``device``: the verbs device (``mlx5_0``, ``rdmap16s27``); "" picks the NIC nearest the GPU
      by PCIe distance (:func:`mkernel.hw.runtime.nics.nic_for_gpu`), else the first;
    - ``provider``: the libfabric provider (``efa``, ``cxi``, ``verbs;ofi_rxm``, ``tcp;ofi_rxm``,
      ``shm``); "" discovers one (shm is never discovered: it reaches only this host);
    - ``gid_index``: -1 uses the LID on InfiniBand and GID 0 elsewhere (give the RoCE v2 index on RoCE);
    - ``publish``: how a receiving proxy (verbs_srd, ofi) sets a flag: ``store`` (the host can address
      the flags), ``loopback`` (an RDMA write to itself, for GPU memory), ``auto`` (store for host
      memory, loopback for GPU memory);
    - ``timeout_s``: every bounded wait: the bootstrap's store reads and a full send queue.
    """

    device: str = ""
    provider: str = ""
    port: int = 1
    gid_index: int = -1
    sq_depth: int = 256
    rq_depth: int = 512
    signal_every: int = 16
    publish: str = "auto"
    timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if self.publish not in (*PUBLISH, "auto"):
            raise InputError(f"publish={self.publish!r} is not one of: store, loopback, auto")
        if min(self.sq_depth, self.rq_depth, self.signal_every, self.port) < 1 or self.timeout_s <= 0:
            raise InputError(f"{self}: depths, signal_every and port must be >= 1, timeout_s > 0")
        if len(self.device.encode()) >= 64 or len(self.provider.encode()) >= 64:
            raise InputError(f"device {self.device!r} / provider {self.provider!r}: at most 63 bytes")


@dataclass(frozen=True)
class Region:
    """What one rank registers: ``nbytes`` at ``base`` (GPU memory of ``cuda_device``, or host memory
    when it is None), holding the flags at offset 0, then the receive and send areas."""

    base: int
    nbytes: int
    recv_off: int
    recv_bytes: int
    send_off: int
    send_bytes: int
    cuda_device: int | None = None


class Endpoint:
    """One rank's network transport, from creation until a proxy takes it (:meth:`take`).

    ``verbs_api``: a test's verbs table (tests/hw/native/fake_verbs.c) instead of libibverbs; ``plant``:
    a planted defect (``ring.PLANT_FLAG_WRITE``) for the tests that prove their checker.
    """

    def __init__(self, name: str, *, rank: int, world: int, n_flags: int, region: Region, peers: Sequence[int],
                 options: NetOptions = NetOptions(), verbs_api: int | None = None, plant: int = ring.PLANT_NONE):
        if name not in NETWORK:
            raise InputError(f"network transport {name!r} is not one of: {', '.join(NETWORK)}")
        self.name, self.rank, self.world, self.peers = name, rank, world, tuple(sorted(set(peers)))
        if any(not 0 <= p < world or p == rank for p in self.peers):
            raise InputError(f"rank {rank}: peers {self.peers} must be other ranks in [0, {world})")
        self._lib = native.load()
        self._peer_mask = (ctypes.c_uint8 * world)(*[int(r in self.peers) for r in range(world)])
        publish = options.publish
        if publish == "auto":
            publish = "store" if region.cuda_device is None else "loopback"
        o = ring.NetOptions()
        o.rank, o.nranks, o.n_flags = rank, world, n_flags
        o.mem_kind = ring.MEM_HOST if region.cuda_device is None else ring.MEM_CUDA
        o.cuda_device = region.cuda_device or 0
        o.mem_base, o.mem_bytes, o.flag_base = region.base, region.nbytes, region.base
        o.peers = self._peer_mask
        o.device, o.provider = options.device.encode(), options.provider.encode()
        o.port, o.gid_index = options.port, options.gid_index
        o.sq_depth, o.rq_depth, o.signal_every = options.sq_depth, options.rq_depth, options.signal_every
        o.publish, o.plant, o.timeout_ns = PUBLISH[publish], plant, int(options.timeout_s * 1e9)
        err = ctypes.create_string_buffer(256)
        self._t = self._lib.mk_net_create(name.encode(), ctypes.byref(o), verbs_api, err, 256)
        if not self._t:
            raise BackendUnavailable(f"rank {rank}: cannot open transport {name}: {err.value.decode()}")
        self.publish, self.region, self.n_flags = publish, region, n_flags

    def _live(self) -> int:
        if not self._t:
            raise ProxyError(f"rank {self.rank}: transport {self.name} was handed to a proxy or closed")
        return self._t

    def address(self) -> bytes:
        """This rank's connection data for its peers (QP numbers, GIDs, endpoint names, rkeys)."""
        buf = ctypes.create_string_buffer(ring.NET_ADDR_MAX)
        n = self._lib.mk_net_address(self._live(), buf, ring.NET_ADDR_MAX)
        if n < 0:
            raise ProxyError(f"rank {self.rank}: {self.name} address: {self._error()}")
        return buf.raw[:n]

    def connect(self, peer: int, blob: bytes) -> ring.NetAddr:
        """Connect to ``peer`` from its :meth:`address`; returns its header (region base and size)."""
        rc = self._lib.mk_net_connect(self._live(), peer, blob, len(blob))
        if rc:
            raise ProxyError(f"rank {self.rank}: {self.name} cannot connect to rank {peer}: {self._error()}")
        return header(blob)

    def provider(self) -> str:
        """The libfabric provider an ``ofi`` endpoint chose ("" for verbs)."""
        return self._lib.mk_ofi_provider(self._live()).decode() if self.name == "ofi" else ""

    def take(self) -> int:
        """The native transport, for a proxy that now owns it (mk_proxy_create_with)."""
        t, self._t = self._live(), None
        return t

    def _error(self) -> str:
        return self._lib.mk_transport_error(self._t).decode()

    def close(self) -> None:
        if getattr(self, "_t", None):
            self._lib.mk_transport_destroy(self._t)
            self._t = None

    def __del__(self):
        self.close()


def header(blob: bytes) -> ring.NetAddr:
    """The mk_net_addr header of an address blob."""
    if len(blob) < ctypes.sizeof(ring.NetAddr):
        raise ProxyError(f"an address of {len(blob)} bytes is shorter than its header")
    h = ring.NetAddr.from_buffer_copy(blob[: ctypes.sizeof(ring.NetAddr)])
    if h.magic != ring.NET_MAGIC:
        raise ProxyError(f"an address with magic {h.magic:#x} is not an mkernel network address")
    return h


def remote_peers(rank: int, world: int, gpus_per_node: int) -> list[int]:
    """The ranks in other nodes: every one a kernel may send to (puts to rail peers, and the call
    barriers' SIGNALs to every remote rank)."""
    return [r for r in range(world) if r // gpus_per_node != rank // gpus_per_node]


def _get(store, key: str, timeout_s: float, what: str) -> bytes:
    try:
        store.wait([key], datetime.timedelta(seconds=timeout_s))
    except Exception as exc:  # torch raises DistStoreError or RuntimeError on a timeout
        raise ProxyError(f"{what} (store key {key!r}) did not arrive within {timeout_s} s: {exc}; did that rank "
                         f"start, and choose the same transport?") from None
    return store.get(key)


def bootstrap(ep: Endpoint, store, *, tag: str, timeout_s: float) -> dict[int, ring.NetAddr]:
    """Publish this rank's address under ``mkernel/net/<tag>/``, connect to every peer from theirs,
    then wait until every peer has connected too (an RC peer must be ready to receive before the
    first write). Returns each peer's header."""
    prefix = f"mkernel/net/{tag}"
    store.set(f"{prefix}/addr/{ep.rank}", ep.address())
    peers = {}
    for p in ep.peers:
        blob = _get(store, f"{prefix}/addr/{p}", timeout_s, f"rank {ep.rank}: rank {p}'s {ep.name} address")
        peers[p] = ep.connect(p, blob)
    store.set(f"{prefix}/ready/{ep.rank}", b"1")
    for p in ep.peers:
        _get(store, f"{prefix}/ready/{p}", timeout_s, f"rank {ep.rank}: rank {p}'s connected mark")
    return peers


def peer_regions(region: Region, rank: int, world: int, n_flags: int, peers: dict[int, ring.NetAddr]) -> Regions:
    """What this rank's proxy may touch: its own send area (the receive area when it has none), and
    each peer's receive area and flags at that peer's registered base (the layout is shared).
    Ranks that are not peers register nothing here, so a command to one is refused."""
    for p, h in peers.items():
        if h.bytes != region.nbytes or h.n_flags != n_flags:
            raise ProxyError(f"rank {rank}: rank {p} registered {h.bytes} bytes with {h.n_flags} flags, this rank "
                             f"{region.nbytes} with {n_flags}: the ranks disagree on the layout")
    src = (region.send_off, region.send_bytes) if region.send_bytes else (region.recv_off, region.recv_bytes)
    dst = tuple((peers[r].base + region.recv_off, region.recv_bytes) if r in peers else (0, 0) for r in range(world))
    flags = tuple(peers[r].base if r in peers else 0 for r in range(world))
    return Regions(src=(region.base + src[0], src[1]), dst=dst, flags=flags, n_flags=n_flags)


def open_network(name: str, *, store, tag: str, rank: int, world: int, gpus_per_node: int, n_flags: int,
                 region: Region, options: NetOptions = NetOptions(), peers: Sequence[int] | None = None,
                 verbs_api: int | None = None, plant: int = ring.PLANT_NONE) -> tuple[Endpoint, Regions]:
    """An endpoint connected to its peers (default: every rank in another node) through ``store``
    (a torch.distributed Store), and the regions its proxy checks commands against. Every rank of
    the group calls it with the same ``tag``."""
    peers = remote_peers(rank, world, gpus_per_node) if peers is None else list(peers)
    ep = Endpoint(name, rank=rank, world=world, n_flags=n_flags, region=region, peers=peers, options=options,
                  verbs_api=verbs_api, plant=plant)
    try:
        headers = bootstrap(ep, store, tag=tag, timeout_s=options.timeout_s)
        return ep, peer_regions(region, rank, world, n_flags, headers)
    except BaseException:
        ep.close()
        raise


def for_gpu(transport: str, cuda_device: int | None, options: NetOptions, nic_map: dict[int, str] | None = None,
            sysfs=nics.SYSFS) -> NetOptions:
    """``options`` with the verbs device this GPU should use filled in when it is "": the explicit map,
    else the nearest NIC by PCIe distance (:func:`mkernel.hw.runtime.nics.choose`); and on RoCE, its RoCE v2
    GID when ``gid_index`` is -1. Host memory and ofi keep what they were given."""
    if transport == "ofi" or cuda_device is None or options.device:
        return options
    found = nics.nics(sysfs)
    if transport == "verbs_srd":
        found = [n for n in found if n.is_efa]
    pick = nics.choose(nics.gpu_pci_ids(), found, nic_map, sysfs).get(cuda_device)
    if pick is None:
        return options
    nic = next((n for n in found if n.name == pick[0]), None)
    gid = options.gid_index
    if gid < 0 and nic is not None and nic.ports:
        port = next((q for q in nic.ports if q.number == options.port), nic.ports[0])
        gid = nics.roce_gid_index(port)
    return dataclasses.replace(options, device=pick[0], gid_index=gid)


_CONTEXTS = itertools.count()  # contexts opened by this process: every rank opens them in the same order


def context_proxy(ctx, transport: str, *, capacity: int, window_us: float, faults=None,
                  options: NetOptions = NetOptions(), nic_map: dict[int, str] | None = None) -> Proxy:
    """The started proxy of a hw Context (mkernel/hw/runtime/context.py) whose ranks in other nodes are
    reached through ``transport``: its symmetric buffer registered (GPU memory, dmabuf or peer
    memory; or host memory, at the host address ``ctx.host_ptr``, when the context's heap is there),
    its address exchanged through torch.distributed's default store, its peers (every rank in another
    node) connected, and the regions taken from their registrations. What context.py builds in place
    of its loopback Proxy (docs/multinode.md)."""
    import torch.distributed as dist

    store = dist.distributed_c10d._get_default_store()
    lay = ctx.layout
    base, memory = (ctx.buffer.data_ptr(), ctx.device.index) if ctx.host_ptr is None else (ctx.host_ptr, None)
    region = Region(base, lay.total, lay.recv_off, lay.recv_bytes, lay.send_off, lay.send_bytes, memory)
    options = for_gpu(transport, ctx.device.index, options, nic_map)
    ep, regions = open_network(transport, store=store, tag=f"ctx{next(_CONTEXTS)}", rank=ctx.rank, world=ctx.world,
                               gpus_per_node=ctx.gpus_per_node, n_flags=lay.n_flags, region=region, options=options)
    return Proxy(rank=ctx.rank, nranks=ctx.world, ring_ptr=ctx.ring.ring_ptr, ctl_ptr=ctx.ring.ctl_ptr,
                 capacity=capacity, regions=regions, transport=ep, window_us=window_us, faults=faults).start()
