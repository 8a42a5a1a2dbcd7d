"""The hw context: everything one rank needs for fused ops, sized once and reused across calls.

It owns a symmetric buffer (arrival flags, receive area, send area) from torch symmetric memory, the
command ring, the epoch counter, the device error block, and the host proxy with its transport. Peers
in the same node are reached through their mapped buffers (peer stores on the GPU); ranks the
cluster places in other nodes are reached through the ring and the proxy.

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


class Context:
    """One rank's runtime. ``group`` is a torch ProcessGroup or its name; ranks are group ranks, and
    rank r sits in node r // gpus_per_node."""

    def __init__(self, group, *, gpus_per_node: int, send_bytes: int, recv_bytes: int, n_flags: int,
                 transport: str = "loopback", shaping: transports.Shaping | None = None,
                 faults: ProxyFaults | None = None, knobs: HwKnobs = DEFAULTS):
        """``faults``: seeded faults the proxy injects (:class:`~mkernel.hw.proxy.ProxyFaults`, tests
        and fault studies); None injects none. ``knobs``: the runtime's timeouts, ring capacity,
        proxy batch window, calls in flight and copy rows (:class:`~mkernel.hw.knobs.HwKnobs`), for
        this context and the executor it serves; with the loopback transport between nodes
        ``knobs.loopback_inflight`` of that executor's calls may still be running on the GPU when a
        call returns (:attr:`inflight_calls`)."""
        require_no_multicast()
        import torch
        import torch.distributed as dist
        import torch.distributed._symmetric_memory as symm_mem

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
        native_name, opts = transports.resolve(transport, shaping)
        self.device = torch.device("cuda", torch.cuda.current_device())
        self.layout = Layout(n_flags, recv_bytes, send_bytes)
        self.buffer = symm_mem.empty(self.layout.total, dtype=torch.uint8, device=self.device)
        self.buffer.zero_()
        self.handle = symm_mem.rendezvous(self.buffer, pg if isinstance(pg, str) else pg.group_name)
        if self.handle.multicast_ptr != 0:
            raise RuntimeError("symmetric memory handed out a multicast pointer; NVLink multicast is forbidden "
                               "(set TORCH_SYMM_MEM_DISABLE_MULTICAST=1 before torch initialises)")
        base = [int(p) for p in self.handle.buffer_ptrs]
        self.flag_ptrs = torch.tensor(base, dtype=torch.int64, device=self.device)
        self.recv_ptrs = torch.tensor([b + self.layout.recv_off for b in base], dtype=torch.int64, device=self.device)
        self.ring = DeviceRing(knobs.ring_capacity, self.device)
        self.epoch = Epoch(self.device)
        self.errors = ErrorBlock(self.device)
        # with no separate send area the receive area is one heap that a rank also sends from
        src = (self.layout.send_off, send_bytes) if send_bytes else (self.layout.recv_off, recv_bytes)
        regions = Regions(src=(base[self.rank] + src[0], src[1]),
                          dst=tuple((b + self.layout.recv_off, recv_bytes) for b in base),
                          flags=tuple(base), n_flags=n_flags)
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
        self.inflight_calls = knobs.loopback_inflight if self.nodes > 1 and native_name == "cuda" else None
        self.executor: str | None = None  # the op of the one Executor this context serves (hw/executor.py)
        self.proxy = None
        if self.nodes > 1:  # one node: peers are reached with peer stores only, no proxy to run
            self.proxy = Proxy(rank=self.rank, nranks=self.world, ring_ptr=self.ring.ring_ptr,
                               ctl_ptr=self.ring.ctl_ptr, capacity=knobs.ring_capacity, regions=regions,
                               transport=native_name, window_us=knobs.window_us, device=self.device.index, faults=faults,
                               **opts).start()

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
