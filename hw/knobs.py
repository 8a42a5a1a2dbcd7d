"""The GPU backend's knobs, declared once: how long a wait may last, how big the command ring is, how
long the proxy waits for a batch, how many calls may stay queued, how many rows an SM moves
per copy step, and which data path those steps take.

One :class:`HwKnobs` is given to a rank's :class:`~mkernel.hw.runtime.context.Context` where it is
built (the torch ops, the CLI, a tool or a test), and everything below reads it from there: the
executor (device waits, copy rows), the proxy (batch window, drain), the ring. Nothing below that
boundary reads the environment. :data:`DEFAULTS` is the same object for the functions that take one
knob as a keyword (the proxy, the standalone GEMM, the self-test), so each default is written here
only.

This module imports nothing of the hw layers: every layer, the kernels included, may import it.
"""
from __future__ import annotations

from dataclasses import dataclass

from mkernel.errors import InputError


# the data paths of the fused kernel's copy steps; a kernel's DATA constexpr is the index
DATA_PATHS = ("register", "auto", "bulk")


@dataclass(frozen=True)
class HwKnobs:
    """The tunables of one rank's hw runtime.

    - ``timeout_s``: every device wait of a call (a flag, a ring slot's credit, a bulk-copy stage, the
      call barrier) gives up after this and records which one failed; the call then raises.
    - ``barrier_timeout_s``: the waits on other ranks' progress between calls: the call barrier (every
      peer has entered this call) and staging's wait for peers to finish the last one. Ranks skew by
      host work between two calls (a peer's first-use initialisation or kernel compile, data loading,
      a checkpoint), which no data wait inside a call sees, so this bound is minutes, as NCCL's
      collective timeout is, while ``timeout_s`` stays seconds.
    - ``drain_timeout_s``: how long closing a context waits for its proxy to post and complete what
      was committed.
    - ``ring_capacity``: records (48 bytes each) of the GPU -> host command ring; a full ring holds
      the pushing block until the proxy returns credit, within ``timeout_s``.
    - ``window_us``: how long the proxy waits for a partial batch of commands to fill before it
      posts it (the simulator's ``proxy.batch_window_us`` models the same wait).
    - ``loopback_inflight``: with the loopback transport between nodes (the emulated cluster), how
      many of an executor's calls may still run on the GPU when a call returns; 0 makes each call
      return once its kernel has finished (hw/runtime/context.py says why).
    - ``copy_rows``: rows (x 256 bf16 columns) of one copy, reduce or gather step per SM: the bytes
      an SM has in flight (16-row steps made gemm_ar 1.5x slower at 16 intra SMs on an H200 pair:
      docs/results/2026-11-30-nvlink.md).
    - ``data_path``: how the fused kernel's copy, gather and reduce steps move data (DATA_PATHS):
      ``register`` (loads into registers, then stores), ``bulk`` (Hopper's bulk asynchronous copies
      through a ring of shared-memory stages, hw/kernels/bulk_copy.py, wherever a step's regions are
      16-byte aligned; 2-D box copies through host-built tensor maps, hw/kernels/bulk_tensor.py,
      for strided tiles and reduces whose regions tile into 16 x 256 boxes), or ``auto``: each step
      where it measured fastest on an H200 at 16 SMs: 1-D bulk copies and gathers for lines of
      bulk_copy.LINE_MIN (4 KiB) or more (2 MiB row copies 1098 vs 823 GB/s, 16-row gathers 593 vs 363),
      box reduces where the regions tile (reduce of 8: 483 vs 463 on registers at 16 SMs, within
      the registers' run-to-run spread, +19% at 1 SM; 207 on 1-D bulk copies), registers for the rest (512-byte-line tile copies: 584 vs 365 as boxes, 206 as 1-D
      copies); docs/results/2026-12-03-box-copies.md and 2026-12-03-bulk-lag.md.
    """

    timeout_s: float = 5.0
    barrier_timeout_s: float = 300.0
    drain_timeout_s: float = 5.0
    ring_capacity: int = 1024
    window_us: float = 2.0
    loopback_inflight: int = 0
    copy_rows: int = 64
    data_path: str = "auto"

    def __post_init__(self) -> None:
        if self.data_path not in DATA_PATHS:
            raise InputError(f"HwKnobs: data_path={self.data_path!r}: one of {', '.join(DATA_PATHS)}")
        if self.loopback_inflight < 0:
            raise InputError(f"loopback_inflight={self.loopback_inflight}: a count of calls, 0 or more")
        positive = ("timeout_s", "barrier_timeout_s", "drain_timeout_s", "ring_capacity", "copy_rows")
        bad = [f"{name}={getattr(self, name)}" for name in positive if not getattr(self, name) > 0]
        if bad or not self.window_us >= 0:
            raise InputError(f"HwKnobs: {', '.join(bad or [f'window_us={self.window_us}'])}: timeouts, the ring "
                             f"capacity and copy rows must be > 0, the batch window >= 0")

    @property
    def timeout_ns(self) -> int:
        return int(self.timeout_s * 1e9)

    @property
    def barrier_timeout_ns(self) -> int:
        return int(self.barrier_timeout_s * 1e9)


DEFAULTS = HwKnobs()
