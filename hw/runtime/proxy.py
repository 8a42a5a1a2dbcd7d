"""The host proxy, as Python sees it: register buffers, start the native thread, stop it, read errors.

The proxy drains a command ring that a producer fills (the GPU's send role, or :class:`HostRing` in
CPU tests and tools), validates every command against the buffers registered here, and hands batches
to a transport. Errors surface as :class:`ProxyError` from :meth:`Proxy.check` or :meth:`Proxy.stop`,
naming the rank, the ring slot, the destination, the chunk and the epoch.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from mkernel.errors import InputError, MkernelError

from ..knobs import DEFAULTS
from ..lowering import ring
from . import native


class ProxyError(MkernelError):
    """The proxy rejected a command, its transport failed, or a bounded wait ran out."""


@dataclass(frozen=True)
class ProxyFaults:
    """Faults the proxy injects, seeded (docs/reliability.md). The defaults inject none.

    - ``drop``: probability that a command is lost. A reliable transport (RC, SRD) reports a lost
      message as a failed completion after its retries, so the proxy fails with that error naming
      the destination and chunk, and every waiter gives up (the abort word);
    - ``reorder``: shuffle each batch's PUTs between its SIGNALs (what an unordered transport may
      do); results must stay exact;
    - ``delay_us``: hold every batch this long before posting it; results exact, later;
    - ``die_after``: the proxy thread dies after consuming this many commands, silently, as a
      crashed process would; waiters time out with errors naming their flag or ring slot, and
      :meth:`Proxy.check` says the proxy is dead.
    """

    seed: int = 0
    drop: float = 0.0
    reorder: bool = False
    delay_us: float = 0.0
    die_after: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.drop <= 1.0 or self.delay_us < 0 or self.die_after < 0 or self.seed < 0:
            raise InputError(f"proxy faults {self}: drop must be in [0, 1], delay_us, die_after and seed >= 0")

    @classmethod
    def parse(cls, text: str) -> ProxyFaults:
        """``"drop=0.01,reorder=1,delay_us=20,die_after=100,seed=3"`` -> ProxyFaults, with one clear
        error for a bad item (`mkernel run --backend hw --faults ...`)."""
        kinds = {"seed": int, "drop": float, "reorder": lambda v: bool(int(v)), "delay_us": float, "die_after": int}
        args = {}
        for item in filter(None, (p.strip() for p in text.split(","))):
            key, sep, value = item.partition("=")
            if not sep or key not in kinds:
                raise InputError(f"--faults item {item!r}: expected key=value with key one of {', '.join(kinds)} "
                                 f"(the hw proxy's faults)")
            try:
                args[key] = kinds[key](value)
            except ValueError:
                raise InputError(f"--faults item {item!r}: bad value for {key}") from None
        return cls(**args)

    def native(self) -> ring.Faults:
        return ring.Faults(self.seed, round(self.drop * 1_000_000), int(self.reorder), round(self.delay_us * 1000),
                           self.die_after)


@dataclass(frozen=True)
class Regions:
    """What one rank's proxy may touch: its send buffer, and each rank's receive buffer and flags.

    Addresses are valid in this process (host memory in tests, device or peer-mapped memory on GPUs).
    """

    src: tuple[int, int]  # (base, bytes)
    dst: tuple[tuple[int, int], ...]  # per rank (base, bytes)
    flags: tuple[int, ...]  # per rank, base of n_flags uint64 arrival flags
    n_flags: int


class HostRing:
    """A ring in host memory with a host producer: the device protocol without a device.

    Used by CPU tests and the CPU side of the benchmark; on a GPU the context puts the ring in pinned
    host memory and the producer is the device's send role.
    """

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.records = np.zeros(capacity, ring.CMD_DTYPE)
        self.ctl = np.zeros(ring.CTL_WORDS, np.uint64)
        self.head = np.zeros(1, np.uint64)

    @property
    def ring_ptr(self) -> int:
        return self.records.ctypes.data

    @property
    def ctl_ptr(self) -> int:
        return self.ctl.ctypes.data

    def push(self, cmd: ring.Command, timeout_s: float = 1.0) -> None:
        """Enqueue one command, waiting (boundedly) for a credit."""
        raw = np.frombuffer(ring.encode(cmd, 0), ring.CMD_DTYPE)
        slot = ctypes.c_uint64()
        rc = native.load().mk_host_push(self.ring_ptr, self.ctl_ptr, self.capacity, self.head.ctypes.data,
                                        raw.ctypes.data, int(timeout_s * 1e9), ctypes.byref(slot))
        if rc == ring.ERR_TIMEOUT:
            raise ProxyError(f"producer: no credit for ring slot {slot.value} within {timeout_s} s "
                             f"(capacity {self.capacity}, consumed {int(self.ctl[ring.CTL_TAIL])}, "
                             f"epoch {cmd.epoch}, chunk {cmd.chunk})")
        if rc == ring.ERR_ABORTED:
            raise ProxyError(f"producer: command (epoch {cmd.epoch}, chunk {cmd.chunk}) not written, the proxy aborted "
                             f"(code {int(self.ctl[ring.CTL_ABORT])}: {ring.ERRORS.get(int(self.ctl[ring.CTL_ABORT]))})")

    def produce(self, dst_rank: int, n: int, n_chunks: int, nbytes: int, epoch: int, timeout_s: float = 5.0) -> None:
        """Push n PUTs from C (chunk i % n_chunks at offset chunk*nbytes): the throughput driver."""
        rc = native.load().mk_host_produce(self.ring_ptr, self.ctl_ptr, self.capacity, self.head.ctypes.data,
                                           dst_rank, n, n_chunks, nbytes, epoch, int(timeout_s * 1e9))
        if rc:
            raise ProxyError(f"producer: {ring.ERRORS.get(rc, rc)} after {int(self.head[0])} commands")


class Proxy:
    """One rank's proxy over one ring. Use as a context manager, or start() and stop().

    ``idle_spin_us`` / ``idle_sleep_us``: with nothing pending or in flight for ``idle_spin_us``, the
    thread sleeps between polls (1 us doubling up to ``idle_sleep_us``; 0 spins always), so an idle
    context's proxy does not hold a core; inside a call, between calls closer than ``idle_spin_us``,
    and for ``idle_spin_us`` after :meth:`kick` (the executor kicks at every launch) it polls flat
    out."""

    def __init__(self, *, rank: int, nranks: int, ring_ptr: int, ctl_ptr: int, capacity: int, regions: Regions,
                 transport="fake", max_batch: int = ring.MAX_BATCH, window_us: float = DEFAULTS.window_us,
                 seed: int = 0, unordered: bool = False, gbytes_per_s: float = 0.0, latency_us: float = 0.0,
                 device: int = 0, streams: int = 1, flag_early: bool = False, cpu: int = -1,
                 faults: ProxyFaults | None = None, idle_spin_us: float = 2000.0, idle_sleep_us: float = 50.0):
        if len(regions.dst) != nranks or len(regions.flags) != nranks:
            raise ValueError(f"regions name {len(regions.dst)} receive buffers and {len(regions.flags)} flag "
                             f"arrays; nranks is {nranks}")
        self._lib = native.load()
        u64s = lambda xs: (ctypes.c_uint64 * nranks)(*xs)  # noqa: E731
        self._keep = (u64s(b for b, _ in regions.dst), u64s(n for _, n in regions.dst), u64s(regions.flags))
        cfg = ring.ProxyConfig(rank, nranks, capacity, max_batch, regions.n_flags, int(window_us * 1000),
                               regions.src[0], regions.src[1], *self._keep, cpu, (faults or ProxyFaults()).native(),
                               int(idle_spin_us * 1000), int(idle_sleep_us * 1000))
        err = ctypes.create_string_buffer(256)
        if hasattr(transport, "take"):  # a network endpoint, connected: the proxy owns it from here
            name = transport.name
            self._p = self._lib.mk_proxy_create_with(ctypes.byref(cfg), ring_ptr, ctl_ptr, transport.take(), err, 256)
        else:
            name = transport
            opts = ring.TransportOptions(seed, int(unordered), gbytes_per_s, int(latency_us * 1000), device, streams,
                                         int(flag_early))
            self._p = self._lib.mk_proxy_create(ctypes.byref(cfg), ring_ptr, ctl_ptr, transport.encode(),
                                                ctypes.byref(opts), err, 256)
        if not self._p:
            raise ProxyError(f"rank {rank}: cannot create the proxy: {err.value.decode()}")
        self.rank, self.transport = rank, name
        self._final: tuple[dict, np.ndarray | None] | None = None

    def kick(self) -> None:
        """A call was just launched: poll flat out (``idle_spin_us`` from now) for its commands."""
        self._lib.mk_proxy_kick(self._live())

    def rebase(self, epoch: int) -> None:
        """Tell a receiving transport (verbs_srd, ofi) that every flag now holds ``epoch``: the
        window it rebuilds epochs in from the immediate's low bits (Executor.fast_forward does
        this to the flags). Call it with no message in flight; other transports ignore it."""
        self._lib.mk_proxy_rebase(self._live(), epoch)

    def start(self) -> Proxy:
        if self._lib.mk_proxy_start(self._p):
            raise ProxyError(f"rank {self.rank}: cannot start the proxy thread")
        return self

    def stop(self, timeout_s: float = DEFAULTS.drain_timeout_s) -> None:
        """Drain everything committed, post it, wait for the transport; raise if anything failed.

        The final counters stay readable (:meth:`stats`, and :meth:`fake_log` for the fake transport)
        after the proxy is closed.
        """
        self._lib.mk_proxy_stop(self._live(), int(timeout_s * 1e9))
        self._final = (self.stats(), self._read_log() if self.transport == "fake" else None)
        self.check()

    def _live(self) -> int:
        if not self._p:
            raise ProxyError(f"rank {self.rank}: the proxy is closed")
        return self._p

    def error(self) -> ring.ProxyError:
        e = ring.ProxyError()
        self._lib.mk_proxy_get_error(self._live(), ctypes.byref(e))
        return e

    def check(self) -> None:
        """Raise the proxy's first error, if any, naming rank, slot, destination, chunk and epoch."""
        e = self.error()
        if e.code:
            raise ProxyError(f"proxy rank {e.rank}: {ring.ERRORS.get(e.code, e.code)} at ring slot {e.slot} "
                             f"(dst_rank {e.dst_rank}, chunk {e.chunk}, epoch {e.epoch}): {e.msg.decode()}")
        stats = self.stats()
        if stats["killed"]:
            raise ProxyError(f"proxy rank {self.rank}: the proxy thread is dead (injected: it died after "
                             f"{stats['commands']} commands); later commands were never posted")

    def stats(self) -> dict[str, int]:
        if not self._p and self._final:
            return self._final[0]
        s = ring.ProxyStats()
        self._lib.mk_proxy_get_stats(self._live(), ctypes.byref(s))
        return {name: int(getattr(s, name)) for name, _ in ring.ProxyStats._fields_}

    def fake_log(self) -> np.ndarray:
        """(is_flag, chunk, dst_rank) rows in the order the fake transport wrote memory, read at stop()."""
        if self._final is None or self._final[1] is None:
            raise ProxyError(f"rank {self.rank}: the event log exists for the fake transport after stop()")
        return self._final[1]

    def _read_log(self, max_events: int = 1 << 20) -> np.ndarray:
        buf = (ctypes.c_uint32 * (2 * max_events))()
        n = self._lib.mk_fake_log(self._lib.mk_proxy_transport(self._live()), buf, max_events)
        raw = np.frombuffer(buf, np.uint32, count=2 * n).reshape(n, 2)
        return np.stack([raw[:, 0] >> 31, raw[:, 0] & 0x7FFFFFFF, raw[:, 1]], axis=1)

    def close(self) -> None:
        if self._p:
            self._lib.mk_proxy_destroy(self._p)
            self._p = None

    def __enter__(self) -> Proxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        try:
            if exc[0] is None:
                self.stop()
        finally:
            self.close()

    def __del__(self):
        if getattr(self, "_p", None):
            self.close()
