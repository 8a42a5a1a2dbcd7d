"""The hw context: everything one rank needs for fused ops, sized once and reused across calls.

It owns a symmetric buffer (arrival flags, receive area, send area) from torch symmetric memory (or
mapped host memory, :mod:`hostheap`), the command ring, the epoch counter, the device error block,
and the host proxy with its transport. Peers in the same node are reached through their mapped
buffers (peer stores on the GPU); ranks the cluster places in other nodes are reached through the
ring and the proxy: the loopback transport's (copies between buffers every rank of this host maps)
or a network transport's (the buffer registered with the NIC, :mod:`netboot`; then only this node's
buffers are mapped).

Use it as a context manager; :meth:`check` surfaces proxy and device-wait errors.
"""
from __future__ import annotations

from dataclasses import dataclass

from mkernel.errors import InputError

from ..knobs import DEFAULTS, HwKnobs
from ..lowering.layout import ALIGN
from . import transports
from .proxy import Proxy, ProxyFaults, Regions
from .safety import require_no_multicast
from .state import DeviceRing, Epoch, ErrorBlock


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclass(frozen=True)
class Layout:
    """Byte offsets inside each rank's symmetric buffer."""

    n_flags: int
    recv_bytes: int
    send_bytes: int

    @property
    def recv_off(self) -> int:
        return _align(8 * self.n_flags)

    @property
    def send_off(self) -> int:
        return self.recv_off + _align(self.recv_bytes)

    @property
    def total(self) -> int:
        return self.send_off + _align(self.send_bytes)


HEAPS = ("device", "host")  # where the symmetric buffer lives (Context's ``heap``)
_LOCAL_GROUPS: dict[tuple[str, tuple[int, ...]], object] = {}  # (group, its node's global ranks) -> group


def current_device():
    """This rank's GPU (the CPU tests of the network wiring put a host device here)."""
    import torch

    return torch.device("cuda", torch.cuda.current_device())


def choose(transport: str, shaping: transports.Shaping | None, nodes: int, heap: str, net=None,
           nic_map: dict[int, str] | None = None) -> tuple[str | None, str | None, dict]:
    """(the transport, its native name, its options) of a context over ``nodes`` nodes, or one
    clear error naming what is wrong or missing, before anything is allocated. One node has no
    transport (None, None, {}): the name is only checked. ``auto`` is the doctor's pick
    (:func:`~mkernel.hw.runtime.transports.auto`)."""
    if transport not in transports.KNOWN:
        raise InputError(f"transport {transport!r} is not one of: {', '.join(transports.KNOWN)}")
    if heap not in HEAPS:
        raise InputError(f"heap={heap!r} is not one of: {', '.join(HEAPS)}")
    if nodes == 1:
        return None, None, {}
    name = transports.auto()[0] if transport == "auto" else transport
    native, opts = transports.resolve(name, shaping)  # a network transport this host cannot use raises here
    if name not in transports.NETWORK and (net is not None or nic_map):
        raise InputError(f"net and nic_map configure a network transport ({', '.join(transports.NETWORK)}); this "
                         f"context's is {name!r}" + (" (what 'auto' picked here)" if transport == "auto" else ""))
    if heap == "host" and name not in transports.NETWORK:
        raise InputError(f"heap='host' is for a network transport whose NIC cannot reach GPU memory; {name!r} between "
                         f"nodes copies GPU buffers (use heap='device')")
    return name, native, opts


def one_host(pg) -> bool:
    """Every rank of ``pg`` runs on this host (the emulated cluster): what ``auto`` reads before the
    doctor's pick, since a NIC is only needed to reach another host."""
    import socket

    import torch.distributed as dist

    hosts: list = [None] * dist.get_world_size(pg)
    dist.all_gather_object(hosts, socket.gethostname(), group=pg)
    return len(set(hosts)) == 1


def agree(pg, rank: int, choice: tuple) -> None:
    """Every rank of ``pg`` chose the same (transport, heap), or one error on every rank naming each
    rank's choice (a rank whose ``auto`` picked otherwise would wait for peers that never come)."""
    import torch.distributed as dist

    seen: list = [None] * dist.get_world_size(pg)
    dist.all_gather_object(seen, choice, group=pg)
    if any(tuple(c) != choice for c in seen):
        chosen = ", ".join(f"rank {r}: {c[0]} (heap {c[1]})" for r, c in enumerate(seen))
        raise InputError(f"rank {rank}: the ranks chose different transports or heaps ({chosen}); every rank must "
                         f"choose the same ('auto' picks by what each host has)")


def node_group(pg, node: int, gpus_per_node: int):
    """The process group of ``pg``'s ranks in ``node``: what the symmetric buffer spans when a network
    transport reaches the other nodes. Made once per (group, node), by that node's ranks alone, in
    the order every rank makes its contexts."""
    import torch.distributed as dist

    ranks = tuple(dist.get_global_rank(pg, r) for r in range(node * gpus_per_node, (node + 1) * gpus_per_node))
    key = (pg.group_name, ranks)
    if key not in _LOCAL_GROUPS:
        _LOCAL_GROUPS[key] = dist.new_group(list(ranks), use_local_synchronization=True)
    return _LOCAL_GROUPS[key]


class Context:
    """One rank's runtime. ``group`` is a torch ProcessGroup or its name; ranks are group ranks, and
    rank r sits in node r // gpus_per_node."""

    def __init__(self, group, *, gpus_per_node: int, send_bytes: int, recv_bytes: int, n_flags: int,
                 transport: str = "loopback", shaping: transports.Shaping | None = None,
                 faults: ProxyFaults | None = None, knobs: HwKnobs = DEFAULTS, heap: str = "device",
                 net=None, nic_map: dict[int, str] | None = None):
        """``transport``: how ranks of other nodes are reached (:mod:`~mkernel.hw.runtime.transports`:
        ``loopback`` emulates nodes on one host; ``verbs_rc``, ``verbs_srd``, ``ofi`` reach other
        hosts; ``auto`` is the loopback where every rank runs on this host, else what ``mkernel doctor``
        picks); with one node there is nothing to reach
        and it is only checked by name. A network transport's buffer is registered with the NIC
        and its address exchanged through the default store (:func:`~mkernel.hw.runtime.netboot.context_proxy`),
        with ``net`` (:class:`~mkernel.hw.runtime.netboot.NetOptions`: provider, device, publishing)
        and ``nic_map`` (GPU index -> NIC name; default: the NIC nearest the GPU); the symmetric
        buffer then spans this node's ranks only, since nothing is mapped between nodes.
        ``heap``: ``device`` (torch symmetric memory) or ``host`` (mapped pinned host memory,
        :mod:`~mkernel.hw.runtime.hostheap`: for a NIC that cannot register GPU memory; slow, exact).
        ``faults``: seeded faults the proxy injects (:class:`~mkernel.hw.proxy.ProxyFaults`, tests
        and fault studies); None injects none. ``knobs``: the runtime's timeouts, ring capacity,
        proxy batch window, calls in flight and copy rows (:class:`~mkernel.hw.knobs.HwKnobs`), for
        this context and the executor it serves; with the loopback transport between nodes
        ``knobs.loopback_inflight`` of that executor's calls may still be running on the GPU when a
        call returns (:attr:`inflight_calls`). Every bad choice is one error before anything is allocated."""
        require_no_multicast()
        import torch
        import torch.distributed as dist

        if isinstance(group, str):
            from torch.distributed.distributed_c10d import _resolve_process_group

            group = _resolve_process_group(group)
        pg = dist.group.WORLD if group is None else group
        self.rank, self.world = dist.get_rank(pg), dist.get_world_size(pg)
        if gpus_per_node < 1 or self.world % gpus_per_node:
            raise InputError(f"gpus_per_node={gpus_per_node} must divide the group's {self.world} ranks")
        self.gpus_per_node, self.nodes = gpus_per_node, self.world // gpus_per_node
        self.node, self.local = divmod(self.rank, gpus_per_node)
        self.knobs = knobs
        self.timeout_ns = knobs.timeout_ns
        if transport == "auto" and self.nodes > 1 and one_host(pg):
            transport = "loopback"  # emulated nodes: the loopback reaches every rank of this host, no NIC needed
        self.transport, native, opts = choose(transport, shaping, self.nodes, heap, net, nic_map)
        network = self.transport in transports.NETWORK
        if self.nodes > 1:
            agree(pg, self.rank, (self.transport, heap))
        self.device = current_device()
        self.layout = Layout(n_flags, recv_bytes, send_bytes)
        self.ring = DeviceRing(knobs.ring_capacity, self.device)  # first: the CUDA context a host heap needs
        self.epoch = Epoch(self.device)
        self.errors = ErrorBlock(self.device)
        # between nodes nothing is mapped: a network transport's ranks map only their own node's buffers
        mapped = node_group(pg, self.node, gpus_per_node) if network else pg
        first = self.node * gpus_per_node if network else 0  # the group rank of mapped's rank 0
        self.host_ptr: int | None = None  # the buffer as the host and its NIC address it (host heap)
        self.handle = None  # torch's symmetric-memory handle (device heap)
        if heap == "host":
            from .hostheap import HostHeap

            host = HostHeap(self.layout.total, group=mapped, device=self.device)
            self.buffer, ptrs, self.host_ptr = host.buffer, host.ptrs, host.host_ptr
        else:
            ptrs = self._symmetric(mapped)
        self.buffer.zero_()
        base = [0] * self.world  # peers in other nodes are reached through the proxy, never by address
        base[first:first + len(ptrs)] = ptrs
        self.flag_ptrs = torch.tensor(base, dtype=torch.int64, device=self.device)
        self.recv_ptrs = torch.tensor([b + self.layout.recv_off if b else 0 for b in base], dtype=torch.int64,
                                      device=self.device)
        torch.cuda.synchronize()
        dist.barrier(pg)  # every rank's buffer is zeroed before any proxy or peer writes into it
        # The loopback proxy moves data with CUDA driver calls from its own thread, and CUDA holds
        # those back while this process's main thread blocks in a copy to the host, an .item(), a
        # first cuBLAS call, or a launch into a full queue, until the GPU work that call waits for
        # is done (tools/host_block_probe.py, measured on the H200, with or without MPS, with the
        # proxy on its own CUDA context too). A running fused kernel that waits for this proxy is
        # such GPU work: both stall until its timeout. So on the emulated cluster a call returns
        # only once its kernel has finished, and the user's next blocking call cannot meet it.
        # A verbs proxy posts work requests, no driver calls: nothing to wait for.
        self.inflight_calls = knobs.loopback_inflight if native == "cuda" else None
        self.executor: str | None = None  # the op of the one Executor this context serves (hw/executor.py)
        self.proxy = None
        if network:
            self.proxy = self._network_proxy(faults, net, nic_map, heap)
        elif self.nodes > 1:  # one node: peers are reached with peer stores only, no proxy to run
            # with no separate send area the receive area is one heap that a rank also sends from
            src = (self.layout.send_off, send_bytes) if send_bytes else (self.layout.recv_off, recv_bytes)
            regions = Regions(src=(base[self.rank] + src[0], src[1]),
                              dst=tuple((b + self.layout.recv_off, recv_bytes) for b in base),
                              flags=tuple(base), n_flags=n_flags)
            self.proxy = Proxy(rank=self.rank, nranks=self.world, ring_ptr=self.ring.ring_ptr,
                               ctl_ptr=self.ring.ctl_ptr, capacity=knobs.ring_capacity, regions=regions,
                               transport=native, window_us=knobs.window_us, device=self.device.index,
                               faults=faults, **opts).start()

    def _symmetric(self, mapped) -> list[int]:
        """This rank's buffer from torch symmetric memory, rendezvoused over ``mapped``; its ranks' pointers."""
        import torch
        import torch.distributed._symmetric_memory as symm_mem

        self.buffer = symm_mem.empty(self.layout.total, dtype=torch.uint8, device=self.device)
        self.handle = symm_mem.rendezvous(self.buffer, mapped if isinstance(mapped, str) else mapped.group_name)
        if self.handle.multicast_ptr != 0:
            raise RuntimeError("symmetric memory handed out a multicast pointer; NVLink multicast is forbidden "
                               "(set TORCH_SYMM_MEM_DISABLE_MULTICAST=1 before torch initialises)")
        return [int(p) for p in self.handle.buffer_ptrs]

    def _network_proxy(self, faults, net, nic_map, heap: str):
        from mkernel.errors import BackendUnavailable

        from . import netboot

        try:
            return netboot.context_proxy(self, self.transport, capacity=self.knobs.ring_capacity,
                                         window_us=self.knobs.window_us, faults=faults,
                                         options=net or netboot.NetOptions(), nic_map=nic_map)
        except BackendUnavailable as exc:
            if heap != "device":
                raise
            raise BackendUnavailable(f"{exc} (where the NIC cannot reach GPU memory, heap='host' puts the buffer in "
                                     f"mapped host memory: slow, exact)") from None

    # views of this rank's own symmetric buffer
    @property
    def flags(self):
        import torch

        return self.buffer[: 8 * self.layout.n_flags].view(torch.int64)

    @property
    def recv(self):
        lay = self.layout
        return self.buffer[lay.recv_off: lay.recv_off + lay.recv_bytes]

    @property
    def send(self):
        lay = self.layout
        return self.buffer[lay.send_off: lay.send_off + lay.send_bytes]

    def check(self) -> None:
        """Synchronise, then raise the first proxy or device-wait error, naming rank, role, flag, epoch."""
        import torch

        torch.cuda.synchronize(self.device)
        if self.proxy is not None:
            self.proxy.check()
        self.errors.check()

    def close(self) -> None:
        if getattr(self, "proxy", None) is not None:
            try:
                self.proxy.stop(timeout_s=self.knobs.drain_timeout_s)
            finally:
                self.proxy.close()
                self.proxy = None

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
