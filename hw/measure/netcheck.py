"""A check of a network transport between real nodes, below the fused kernels: every rank sends
chunks to every rank in another node through the real proxy and transport, call after call, and
checks what landed in its own memory against the senders' seeds. No GPU kernel runs: the host
pushes the ring commands a send role would push (PUTs with their flags, data-only PUTs and the
SIGNAL that announces them), into GPU memory (``--memory cuda``) or host memory.

Run on every node (one process per GPU)::

    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29500 \\
        -m mkernel.hw.measure.netcheck --transport verbs_rc --memory cuda

Each rank prints one line; rank 0 prints ``PASS`` or ``FAIL`` for the whole job, and the exit code
is 0 or 1 (2 for bad arguments or an unusable transport).
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys
import time

import numpy as np

from mkernel.errors import MkernelError

from ..lowering import ring
from ..lowering.layout import ALIGN
from ..runtime.netboot import NetOptions, Region, for_gpu, open_network, remote_peers
from ..runtime.safety import apply_no_multicast

CHUNK = 4096  # bytes per chunk


def mesh(world: int, gpn: int, n_chunks: int, chunk: int = CHUNK, signal_every: int = 4):
    """(n_flags, heap bytes, sink, {rank: commands}): each rank sends n_chunks chunks to every rank
    in another node from the upper half of its heap (nobody writes there) into its own slot of the
    peer's lower half. Chunk c goes as a PUT with its own flag, except every ``signal_every``-th
    group, which goes as data-only PUTs (their flag the sink) then one SIGNAL announcing them: the
    two forms the plans use. Commands are (type, dst, flag, bytes, src_off, dst_off)."""
    sink, src0 = world * n_chunks + world, world * n_chunks
    out = {}
    for r in range(world):
        cmds = []
        for c in range(n_chunks):
            for d in remote_peers(r, world, gpn):
                off, flag = (r * n_chunks + c) * chunk, r * n_chunks + c
                if signal_every and (c // signal_every) % 2:  # odd groups: data-only, then a SIGNAL
                    cmds.append((ring.PUT, d, sink, chunk, (src0 + c) * chunk, off))
                    if c % signal_every == signal_every - 1:
                        cmds.append((ring.SIGNAL, d, flag, 0, 0, 0))
                else:
                    cmds.append((ring.PUT, d, flag, chunk, (src0 + c) * chunk, off))
        out[r] = cmds
    return sink + 1, 2 * world * n_chunks * chunk, sink, out


def source_bytes(rank: int, epoch: int, nbytes: int) -> np.ndarray:
    """What ``rank`` sends in call ``epoch``, seeded: every rank can rebuild what it must receive."""
    return np.random.default_rng(epoch * 1000 + rank).integers(0, 256, nbytes, dtype=np.uint8)


class _Memory:
    """The registered region: flags at 0, then the heap; in host memory or on a GPU (torch)."""

    def __init__(self, n_flags: int, heap_bytes: int, cuda_device: int | None):
        self.heap_off = -(-8 * n_flags // ALIGN) * ALIGN
        total = self.heap_off + heap_bytes
        self.n_flags, self.cuda_device = n_flags, cuda_device
        if cuda_device is None:
            self.buf = np.zeros(total, np.uint8)
            self.base = self.buf.ctypes.data
        else:
            import torch

            self.buf = torch.zeros(total, dtype=torch.uint8, device=f"cuda:{cuda_device}")
            self.base = self.buf.data_ptr()
            torch.cuda.synchronize(cuda_device)
        self.region = Region(self.base, total, self.heap_off, heap_bytes, 0, 0, cuda_device)

    def flags(self) -> np.ndarray:
        raw = self.buf[: 8 * self.n_flags]
        return (raw.view(np.uint64) if self.cuda_device is None else raw.cpu().numpy().view(np.uint64)).copy()

    def read(self, off: int, n: int) -> np.ndarray:
        part = self.buf[self.heap_off + off: self.heap_off + off + n]
        return part.copy() if self.cuda_device is None else part.cpu().numpy()

    def write(self, off: int, data: np.ndarray) -> None:
        if self.cuda_device is None:
            self.buf[self.heap_off + off: self.heap_off + off + len(data)] = data
        else:
            import torch

            self.buf[self.heap_off + off: self.heap_off + off + len(data)].copy_(torch.from_numpy(data))
            torch.cuda.synchronize(self.cuda_device)


def _barrier(store, name: str, rank: int, world: int, timeout_s: float) -> None:
    store.set(f"mkernel/netcheck/{name}/{rank}", b"1")
    store.wait([f"mkernel/netcheck/{name}/{r}" for r in range(world)], datetime.timedelta(seconds=timeout_s))


def run_rank(rank: int, world: int, gpn: int, store, transport: str, *, options: NetOptions = NetOptions(),
             calls: int = 3, n_chunks: int = 16, chunk: int = CHUNK, cuda_device: int | None = None,
             faults=None, tag: str = "netcheck") -> dict:
    """One rank's part: bootstrap through ``store``, then ``calls`` calls of the mesh. Returns what
    landed in this rank's memory per call ("calls": epoch, the lower heap half, the flags), the
    provider, and every error as text ("errors"), for its caller to judge."""
    from ..runtime.proxy import HostRing, Proxy, ProxyFaults

    result = {"rank": rank, "calls": [], "errors": [], "provider": None, "seconds": []}
    try:
        n_flags, heap_bytes, sink, streams = mesh(world, gpn, n_chunks, chunk)
        mem, half = _Memory(n_flags, heap_bytes, cuda_device), heap_bytes // 2
        ep, regions = open_network(transport, store=store, tag=tag, rank=rank, world=world, gpus_per_node=gpn,
                                   n_flags=n_flags, region=mem.region, options=options)
        result["provider"] = ep.provider()
        hr = HostRing(256)
        proxy = Proxy(rank=rank, nranks=world, ring_ptr=hr.ring_ptr, ctl_ptr=hr.ctl_ptr, capacity=256,
                      regions=regions, transport=ep, faults=faults or ProxyFaults()).start()
        mine = sorted({f for cmds in streams.values() for _k, d, f, *_ in cmds if d == rank and f != sink})
        try:
            for epoch in range(1, calls + 1):
                mem.write(half, source_bytes(rank, epoch, half))
                _barrier(store, f"{tag}/src{epoch}", rank, world, options.timeout_s)
                t0 = time.perf_counter()
                proxy.kick()  # as the executor does at every launch: poll flat out, a call is coming
                for kind, dst, flag, nbytes, s_off, d_off in streams[rank]:
                    hr.push(ring.Command(kind, dst, flag, nbytes, s_off, d_off, epoch), timeout_s=options.timeout_s)
                deadline = time.monotonic() + options.timeout_s
                while (missing := [f for f in mine if int(mem.flags()[f]) != epoch]) and time.monotonic() < deadline:
                    time.sleep(1e-4)
                result["seconds"].append(time.perf_counter() - t0)
                result["calls"].append({"epoch": epoch, "heap": mem.read(0, half), "flags": mem.flags()})
                if missing:
                    raise TimeoutError(f"rank {rank}: flags {missing} not set to epoch {epoch} within "
                                       f"{options.timeout_s} s")
                _barrier(store, f"{tag}/done{epoch}", rank, world, options.timeout_s)
        finally:
            try:
                proxy.stop(timeout_s=options.timeout_s)
            except Exception as exc:  # noqa: BLE001 - reported, the caller judges
                result["errors"].append(f"stop: {type(exc).__name__}: {exc}")
            proxy.close()
    except Exception as exc:  # noqa: BLE001
        result["errors"].insert(0, f"{type(exc).__name__}: {exc}")
    return result


def expected(rank: int, world: int, gpn: int, epoch: int, n_chunks: int = 16, chunk: int = CHUNK):
    """(bytes, mask) of the lower heap half ``rank`` must hold after call ``epoch``."""
    _n, heap_bytes, _sink, streams = mesh(world, gpn, n_chunks, chunk)
    half = heap_bytes // 2
    want, mask = np.zeros(half, np.uint8), np.zeros(half, bool)
    for src, cmds in streams.items():
        sent = source_bytes(src, epoch, half)
        for kind, dst, _f, n, s_off, d_off in cmds:
            if kind == ring.PUT and dst == rank:
                want[d_off:d_off + n] = sent[s_off - half:s_off - half + n]
                mask[d_off:d_off + n] = True
    return want, mask


def verdict(result: dict, world: int, gpn: int, calls: int) -> str | None:
    """None if this rank received every chunk of every call exactly, else what went wrong."""
    if result["errors"]:
        return "; ".join(result["errors"])
    if [c["epoch"] for c in result["calls"]] != list(range(1, calls + 1)):
        return f"calls {[c['epoch'] for c in result['calls']]} of {calls}"
    for c in result["calls"]:
        want, mask = expected(result["rank"], world, gpn, c["epoch"])
        if not np.array_equal(c["heap"][mask], want[mask]):
            return f"call {c['epoch']}: {int((c['heap'][mask] != want[mask]).sum())} bytes differ from the senders'"
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mkernel.hw.measure.netcheck", description=__doc__.split("\n\n")[0])
    p.add_argument("--transport", required=True, choices=("verbs_rc", "verbs_srd", "ofi"))
    p.add_argument("--memory", choices=("host", "cuda"), default="host")
    p.add_argument("--provider", default="", help="ofi: the libfabric provider (default: discovered)")
    p.add_argument("--device", default="", help="verbs: the RDMA device (default: the NIC nearest the GPU)")
    p.add_argument("--gid-index", type=int, default=-1)
    p.add_argument("--gpus-per-node", type=int, default=0,
                   help="ranks per node (default: torchrun's LOCAL_WORLD_SIZE; less emulates nodes on one host)")
    p.add_argument("--calls", type=int, default=3)
    p.add_argument("--timeout", type=float, default=30.0)
    args = p.parse_args(argv)
    apply_no_multicast()  # the process's entry (torchrun -m mkernel.hw.measure.netcheck)
    import torch.distributed as dist

    from ..runtime import transports

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])  # torchrun's, at the CLI boundary
    local, gpn = int(os.environ.get("LOCAL_RANK", 0)), args.gpus_per_node or int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    if gpn < 1 or world % gpn or world == gpn:
        print(f"rank {rank}: FAIL: {world} ranks in nodes of {gpn}: need at least two nodes", flush=True)
        return 2
    try:
        transports.require(args.transport)
    except MkernelError as exc:
        print(f"rank {rank}: FAIL: {exc}", flush=True)
        return 2
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout * 4))
    store = dist.distributed_c10d._get_default_store()
    gpu = None
    if args.memory == "cuda":
        import torch

        gpu = local % max(1, torch.cuda.device_count())  # ranks beyond the GPUs share them (one H200)
    opts = for_gpu(args.transport, gpu, NetOptions(device=args.device, provider=args.provider,
                                                   gid_index=args.gid_index, timeout_s=args.timeout))
    device = opts.device
    result = run_rank(rank, world, gpn, store, args.transport, options=opts, calls=args.calls, cuda_device=gpu)
    why = verdict(result, world, gpn, args.calls)
    speed = f", {np.median(result['seconds']) * 1e3:.2f} ms per call" if result["seconds"] else ""
    print(f"rank {rank}: {'ok' if why is None else 'FAIL: ' + why} ({args.transport}"
          f"{' ' + result['provider'] if result['provider'] else ''}{' ' + device if device else ''}{speed})",
          flush=True)
    store.set(f"mkernel/netcheck/verdict/{rank}", b"1" if why is None else b"0")
    if rank == 0:
        keys = [f"mkernel/netcheck/verdict/{r}" for r in range(world)]
        store.wait(keys, datetime.timedelta(seconds=args.timeout))
        bad = [r for r, k in enumerate(keys) if store.get(k) != b"1"]
        print(f"{'PASS' if not bad else 'FAIL'}: {args.transport} between {world // gpn} nodes x {gpn} ranks, "
              f"{args.calls} calls{'' if not bad else f'; ranks {bad} failed'}", flush=True)
        return 0 if not bad else 1
    return 0 if why is None else 1


if __name__ == "__main__":
    sys.exit(main())
