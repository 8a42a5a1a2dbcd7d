"""Which path an op call takes: the fused kernel or the unfused torch path, with the reason.

One predicate per op (:func:`decide`), in the spirit of torch's ``_should_use_fused_*``, decided
before any launch from the call's shapes, group and topology:

1. ``mode="fallback"``: the torch path; ``mode="fused"``: the fused kernel, or an InputError that
   says why the kernel cannot run this call;
2. ``auto`` at world 1: the torch path. One rank has nothing to communicate, so the op is a plain
   matmul or attention, and torch's own kernel is the best there is;
3. ``auto`` on a call the kernel cannot run (dtype, rows that are not whole 16-byte vectors, an
   empty problem, a causal sequence that does not split in halves): the torch path, with that
   reason;
4. ``auto`` otherwise: the fused kernel only where a measured table (``dispatch.toml``, written
   from ``mkernel bench`` runs, each row naming its source) shows it at least FUSED_MARGIN faster
   than the torch path for this GPU, op, world and node size, at the measured size nearest this
   call's work (within a factor of NEAREST). No measurement: the torch path. So auto is never
   slower than torch by more than the noise of the measurement it rests on.
"""
from __future__ import annotations

import functools
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

from mkernel.errors import InputError

MODES = ("auto", "fused", "fallback")
FUSED_MARGIN = 1.05  # a measured speedup must clear run-to-run noise (about 5% between runs of one bench)
NEAREST = 4.0  # a measurement stands for sizes within this factor of its work, no further
TABLE = Path(__file__).with_name("dispatch.toml")


@dataclass(frozen=True)
class Decision:
    """The path a call takes (``"fused"`` or ``"fallback"``) and why."""

    path: str
    reason: str

    @property
    def fused(self) -> bool:
        return self.path == "fused"

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass(frozen=True)
class Call:
    """What the rule reads of a call: the op, its problem (the CLI's m, n, k: per-op meaning in
    README), the group's size and node size, the GPU, and the kernel's own objection (None: it
    can run this call)."""

    op: str
    m: int
    n: int
    k: int
    world: int
    gpus_per_node: int
    device: str  # the GPU's name (torch.cuda.get_device_name)
    unsupported: str | None = None
    topk: int = 1


def decide(call: Call, mode: str = "auto") -> Decision:
    """The path of ``call`` under ``mode`` (see the module docstring for the rule)."""
    if mode not in MODES:
        raise InputError(f"mkernel.{call.op}: mode={mode!r} is not one of {', '.join(MODES)}")
    if mode == "fallback":
        return Decision("fallback", "mode='fallback' asked for the torch path")
    if mode == "fused":
        if call.unsupported:
            raise InputError(f"mkernel.{call.op}: mode='fused', but the fused kernel cannot run this call: "
                             f"{call.unsupported}")
        return Decision("fused", "mode='fused' asked for the fused kernel")
    if call.world == 1:
        return Decision("fallback", "one rank has nothing to communicate: torch's own kernel is the op")
    if call.unsupported:
        return Decision("fallback", f"the fused kernel cannot run this call ({call.unsupported})")
    row = nearest(call)
    if row is None:
        return Decision("fallback", f"no measurement of the fused {call.op} on {call.device} at world {call.world} "
                                    f"({call.gpus_per_node} per node) near this size (run `mkernel bench` there)")
    speedup, where = row
    if speedup >= FUSED_MARGIN:
        return Decision("fused", f"measured {speedup:.2f}x the torch path near this size ({where})")
    return Decision("fallback", f"the fused op measured {speedup:.2f}x the torch path near this size, under "
                                f"{FUSED_MARGIN:.2f}x ({where})")


def work(op: str, m: int, n: int, k: int, world: int, topk: int = 1) -> float:
    """The useful FLOPs one GPU does (mkernel-design.md's metric), to compare sizes by."""
    if op == "ring_attention":
        return 4.0 * n * m * m * world * k  # n = batch x heads, m = sequence per GPU, k = head dim
    if op == "moe_dispatch_gemm":
        return 2.0 * m * topk * k * n / world
    return 2.0 * m * n * k


def nearest(call: Call) -> tuple[float, str] | None:
    """(speedup, source) of the measured row nearest ``call``'s work, or None within NEAREST."""
    rows = [r for r in _table().get(_gpu_key(call.device), []) if r["op"] == call.op and r["world"] == call.world
            and r["gpus_per_node"] == call.gpus_per_node]
    if not rows:
        return None
    here = work(call.op, call.m, call.n, call.k, call.world, call.topk)
    dist_of = {id(r): abs(math.log(max(here, 1.0) / work(call.op, r["m"], r["n"], r["k"], call.world,
                                                          r.get("topk", 1)))) for r in rows}
    best = min(rows, key=lambda r: dist_of[id(r)])
    if dist_of[id(best)] > math.log(NEAREST):
        return None
    return float(best["speedup"]), f"{best['source']}, m={best['m']}"


def _gpu_key(device: str) -> str:
    """The table's key for a GPU name: 'NVIDIA H200' -> 'h200'."""
    return device.lower().replace("nvidia", "").strip().split()[0] if device.strip() else ""


@functools.cache
def _table() -> dict[str, list[dict]]:
    """dispatch.toml: per GPU key, its measured rows (checked once: a bad row is one clear error)."""
    data = tomllib.loads(TABLE.read_text())
    need = {"op": str, "world": int, "gpus_per_node": int, "m": int, "n": int, "k": int, "speedup": float,
            "source": str}
    for gpu, rows in data.items():
        for i, r in enumerate(rows):
            for key, kind in need.items():
                if not isinstance(r.get(key), kind):
                    raise InputError(f"{TABLE}: [[{gpu}]] row {i + 1}: key {key!r} must be a {kind.__name__}, "
                                     f"got {r.get(key)!r}")
    return data
