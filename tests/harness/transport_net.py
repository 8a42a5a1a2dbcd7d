"""Shared by the network-transport tests: ranks' host memory in the shared layout, the ops' real ring
command streams, stores for the bootstrap without torch, and the checker of delivery order.

The checker is the tests' oracle, kept apart from the code under test: from the order in which
writes landed (the fake verbs log) it decides whether any flag became visible before the data it
announces, and whether any SIGNAL's flag overtook a write posted before it to its rank.
"""
from __future__ import annotations

import datetime
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mkernel import builders
from mkernel.cluster import Cluster
from mkernel.hw.lowering import plan, ring
from mkernel.hw.lowering.layout import Command, Task
from mkernel.hw.runtime.context import Layout  # the layout every rank's symmetric buffer has
from mkernel.hw.runtime.netboot import Region
from mkernel.ir import Op

from .cases import small_workload

class Memory:
    """One rank's registered region in host memory: zeroed flags, a seeded random heap."""

    def __init__(self, layout: Layout, rank: int, seed: int):
        self.layout = layout
        self.buf = np.zeros(layout.total, np.uint8)
        rng = np.random.default_rng(seed * 1009 + rank)
        self.buf[layout.recv_off:] = rng.integers(0, 256, layout.total - layout.recv_off, dtype=np.uint8)
        self.initial = self.buf.copy()

    @property
    def flags(self) -> np.ndarray:
        return self.buf[: 8 * self.layout.n_flags].view(np.uint64)

    def region(self, cuda_device: int | None = None) -> Region:
        lay = self.layout
        return Region(self.buf.ctypes.data, lay.total, lay.recv_off, lay.recv_bytes, lay.send_off, lay.send_bytes,
                      cuda_device)

    def heap(self, off: int, nbytes: int, initial: bool = False) -> np.ndarray:
        b = self.initial if initial else self.buf
        return b[self.layout.recv_off + off: self.layout.recv_off + off + nbytes]


# -- the ops' command streams (each op's small workload, on 2 x 2) -----------------------------------


@dataclass(frozen=True)
class Streams:
    """What every rank's send role pushes in one call, in one order its blocks may push it."""

    n_flags: int
    heap_bytes: int
    sink: int
    commands: dict[int, list[tuple[int, int, int, int, int, int]]]  # rank -> (type, dst, flag, bytes, src, dst_off)


COMMAND_FIELDS = (Command.KIND, Command.DST_RANK, Command.FLAG, Command.NBYTES, Command.SRC_OFF, Command.DST_OFF)


def op_streams(kernel: str, nodes: int = 2, gpn: int = 2, seed: int = 0) -> Streams:
    """The ring commands of one call of ``kernel``'s fused plan on every rank: the call barriers'
    SIGNALs to every remote rank, then each PUT task's commands (the tasks in a seeded order, as
    several send blocks may claim them; one task's commands stay in order), then the exit SIGNALs."""
    w = small_workload(kernel)
    c = Cluster("t", nodes, gpn).with_sms(132 // (nodes * gpn))
    plans = plan.build(builders.get(kernel).build(w, c))
    rng = np.random.default_rng(seed)
    put = plan.OP_CODE[Op.PUT]
    out = {}
    for p in plans:
        remote = [d for d in range(p.world) if d // gpn != p.rank // gpn]
        tasks = [row for row in p.tasks if int(row[Task.OP]) == put]
        order = rng.permutation(len(tasks))
        cmds = [(ring.SIGNAL, d, p.arrive0 + p.rank, 0, 0, 0) for d in remote]
        for i in order:
            a0, a1 = int(tasks[i][Task.A0]), int(tasks[i][Task.A1])
            cmds += [tuple(int(row[c]) for c in COMMAND_FIELDS) for row in p.aux[a0:a1]]
        cmds += [(ring.SIGNAL, d, p.exit0 + p.rank, 0, 0, 0) for d in remote]
        out[p.rank] = cmds
    return Streams(plans[0].n_flags, plans[0].placement.heap_bytes, plans[0].sink, out)


def mesh_streams(n_chunks: int, world: int = 4, gpn: int = 2, signal_every: int = 0) -> Streams:
    """netcheck's mesh with 64-byte chunks: each rank sends n_chunks chunks to every remote rank;
    with ``signal_every``, every other group of that many goes as data-only PUTs and a SIGNAL."""
    from mkernel.hw.measure.netcheck import mesh

    n_flags, heap, sink, cmds = mesh(world, gpn, n_chunks, 64, signal_every)
    return Streams(n_flags, heap, sink, cmds)


def commands(stream, epoch: int) -> list[ring.Command]:
    return [ring.Command(t, d, f, b, s, o, epoch) for t, d, f, b, s, o in stream]


# -- the oracle ------------------------------------------------------------------------------------

def order_violations(log: np.ndarray, streams: Streams, layout: Layout, bases: dict[int, int]) -> list[str]:
    """Every flag that landed before the data it announces, and every SIGNAL flag that landed before
    a write posted ahead of it to its rank, from the harness log of landed writes (source, target,
    address, length, imm) of one call. A flag lands as an 8-byte write into the target's flag area
    (RC's flag write, a receiving proxy's loopback publish, a planted flag write)."""
    flag_area = {d: (b, b + 8 * layout.n_flags) for d, b in bases.items()}
    landed: set[tuple[int, int, int, int]] = set()  # (src, dst, heap offset, bytes) of data writes
    flag_time: dict[tuple[int, int], int] = {}
    for t, (src, dst, addr, nbytes, _imm) in enumerate(log.tolist()):
        lo, hi = flag_area[dst]
        if lo <= addr < hi and nbytes == 8:
            flag_time.setdefault((dst, (addr - lo) // 8), t)
        elif nbytes:
            landed_at = (src, dst, addr - bases[dst] - layout.recv_off, nbytes)
            landed.add(landed_at)
            flag_time.setdefault(("data", *landed_at), t)
    bad = []
    for src, cmds in streams.commands.items():
        before: list[tuple] = []  # this source's data writes so far, per destination
        for kind, dst, flag, nbytes, _s, dst_off in cmds:
            if kind == ring.PUT:
                before.append((dst, dst_off, nbytes))
            if flag == streams.sink:
                continue
            seen = flag_time.get((dst, flag))
            if seen is None:
                bad.append(f"rank {src} -> {dst}: flag {flag} never landed")
                continue
            need = [(dst, dst_off, nbytes)] if kind == ring.PUT else [b for b in before if b[0] == dst]
            for d, off, n in need:
                t = flag_time.get(("data", src, d, off, n))
                if t is None or t > seen:
                    bad.append(f"rank {src} -> {dst}: flag {flag} landed before data [{off}, +{n})")
    return bad


def data_mismatches(mems: dict[int, Memory], streams: Streams) -> list[str]:
    """Destination ranges (written once per call) that differ from their source bytes."""
    bad = []
    for src, cmds in streams.commands.items():
        for kind, dst, _flag, nbytes, s_off, d_off in cmds:
            if kind == ring.PUT and dst in mems and src in mems:
                if not np.array_equal(mems[dst].heap(d_off, nbytes), mems[src].heap(s_off, nbytes, initial=True)):
                    bad.append(f"rank {src} -> {dst}: [{d_off}, +{nbytes}) differs from its source")
    return bad


def flagged(mems: dict[int, Memory], streams: Streams, epoch: int) -> bool:
    """Whether every flag a command of this call sets holds ``epoch`` on its rank."""
    return all(int(mems[d].flags[f]) == epoch for cmds in streams.commands.values()
               for _k, d, f, _n, _s, _o in cmds if d in mems)


def wait_until(pred, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            return False
        time.sleep(1e-3)
    return True


# -- stores with torch.distributed's Store interface (set, get, wait) ------------------------------

class DictStore:
    """In one process, for ranks on threads."""

    def __init__(self):
        self._d: dict[str, bytes] = {}
        self._cv = threading.Condition()

    def set(self, key: str, value) -> None:
        with self._cv:
            self._d[key] = bytes(value)
            self._cv.notify_all()

    def get(self, key: str) -> bytes:
        with self._cv:
            return self._d[key]

    def wait(self, keys, timeout: datetime.timedelta) -> None:
        with self._cv:
            if not self._cv.wait_for(lambda: all(k in self._d for k in keys), timeout.total_seconds()):
                raise RuntimeError(f"Wait timeout for keys {keys}")


class FileStore:
    """Across processes of one host with no torch (CI): one file per key, written atomically."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return self.root / key.replace("/", "__")

    def set(self, key: str, value) -> None:
        tmp = self._path(key).with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(bytes(value))
        tmp.replace(self._path(key))

    def get(self, key: str) -> bytes:
        return self._path(key).read_bytes()

    def wait(self, keys, timeout: datetime.timedelta) -> None:
        if not wait_until(lambda: all(self._path(k).exists() for k in keys), timeout.total_seconds()):
            raise RuntimeError(f"Wait timeout for keys {keys}")


# -- a rank process of the libfabric test (tests/hw/test_transport_ofi.py) ------------------------------

def ofi_rank(rank: int, world: int, gpn: int, store: str, provider: str, publish: str, calls: int,
             faults: dict, wait_s: float, out) -> None:
    """One rank in its own process: mkernel.hw.measure.netcheck's rank, bootstrapped through a file store
    (``store`` a folder: CI has no torch) or torch.distributed's TCPStore (``store`` "tcp:PORT");
    its report (what landed, errors as text) goes to the test, which judges it."""
    from mkernel.hw.runtime.netboot import NetOptions
    from mkernel.hw.measure.netcheck import run_rank
    from mkernel.hw.runtime.proxy import ProxyFaults

    if store.startswith("tcp:"):
        import torch.distributed as dist

        kv = dist.TCPStore("127.0.0.1", int(store[4:]), world, rank == 0, timeout=datetime.timedelta(seconds=wait_s))
    else:
        kv = FileStore(Path(store))
    out.put(run_rank(rank, world, gpn, kv, "ofi", calls=calls, faults=ProxyFaults(**faults),
                     options=NetOptions(provider=provider, publish=publish, timeout_s=wait_s)))


# -- a rank process of the Context's network wiring on CPU (tests/hw/test_context_transport.py) -------

def context_rank(rank: int, world: int, gpn: int, port: int, provider: str, out) -> None:
    """One rank of a hw Context with the ``ofi`` transport, in its own process with no GPU: where the
    Context needs CUDA, host stand-ins (a host device, :class:`HostRing` for the device ring, a CPU
    tensor for the symmetric buffer, its pointers exchanged over the node-local group); the rest is
    real: the transport choice, the node-local process group, netboot's registration and store
    bootstrap, the proxy and libfabric. Each rank pushes one PUT to every rank of the other node
    (64 bytes of ``10 + rank`` at offset 64 * rank, flag ``rank``, epoch 1) and reports what landed
    in its buffer and its flag and receive pointers; the test judges."""
    import torch
    import torch.distributed as dist

    from mkernel.hw.runtime import context
    from mkernel.hw.runtime.netboot import NetOptions
    from mkernel.hw.runtime.proxy import HostRing

    report = {"rank": rank, "error": None}
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=30))
        context.current_device = lambda: torch.device("cpu")
        context.DeviceRing = lambda capacity, device: HostRing(capacity)
        context.Epoch = context.ErrorBlock = lambda device: None
        torch.cuda.synchronize = lambda *a, **k: None

        def symmetric(self, mapped) -> list[int]:  # the rendezvous over the node: pointers, nothing mapped
            self.buffer = torch.zeros(self.layout.total, dtype=torch.uint8)
            ptrs: list = [None] * dist.get_world_size(mapped)
            dist.all_gather_object(ptrs, self.buffer.data_ptr(), group=mapped)
            report["node_group"] = dist.get_process_group_ranks(mapped)
            return ptrs

        context.Context._symmetric = symmetric
        with context.Context(None, gpus_per_node=gpn, send_bytes=0, recv_bytes=4096, n_flags=8, transport="ofi",
                             net=NetOptions(provider=provider, timeout_s=10.0)) as ctx:
            lay = ctx.layout
            mine = ctx.buffer[lay.recv_off + 64 * rank: lay.recv_off + 64 * (rank + 1)]
            mine.fill_(10 + rank)
            dist.barrier()
            remote = [r for r in range(world) if r // gpn != rank // gpn]
            ctx.proxy.kick()
            for dst in remote:
                ctx.ring.push(ring.Command(ring.PUT, dst, rank, 64, 64 * rank, 64 * rank, 1), timeout_s=10.0)
            flags = ctx.flags
            wait_until(lambda: all(int(flags[r]) == 1 for r in remote), 10.0)
            report.update(transport=ctx.transport, flags=flags.tolist(), heap=ctx.recv[:64 * world].clone().numpy(),
                          flag_ptrs=ctx.flag_ptrs.tolist(), recv_ptrs=ctx.recv_ptrs.tolist(), recv_off=lay.recv_off,
                          proxy=ctx.proxy.transport)
            dist.barrier()
    except Exception as exc:  # noqa: BLE001 - reported, the test judges
        import traceback

        report["error"] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
    out.put(report)


def collect(procs, out, world: int, deadline_s: float, join_s: float = 5.0) -> dict:
    """Start ``procs`` (one per rank) and take each rank's report from ``out`` within ``deadline_s``;
    a rank that did not report is a failure naming it. Every process is joined, then killed if alive."""
    import queue

    for p in procs:
        p.start()
    reports, deadline = {}, time.monotonic() + deadline_s
    try:
        while len(reports) < world:
            try:
                r = out.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"ranks {sorted(set(range(world)) - set(reports))} did not report in time") from None
            reports[r["rank"]] = r
    finally:
        for p in procs:
            p.join(join_s)
            if p.is_alive():
                p.kill()
    return reports
