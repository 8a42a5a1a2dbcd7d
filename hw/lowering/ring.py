"""The device protocol's constants, mirrored from ``csrc/mk_ring.h`` (where the protocol is
specified, once): the command ring's record layout and control words, error codes, the device
waits' poll cadence, role and "what" codes; and the C structures the proxy takes.

One 48-byte record per command. Python uses this module to encode and decode records (tests, tools),
and the fused kernel's Triton copy of the protocol (:mod:`mkernel.hw.kernels.sync`) takes its
constants from here; a test reads every constant of the header from the compiled C and checks this
mirror, :mod:`layout` and the kernel's constexprs against it.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from mkernel.ir import COMMAND_BYTES

PUT, SIGNAL = 1, 2
MAX_BATCH = 8  # commands per connection per post (MK_MAX_BATCH)

CMD_DTYPE = np.dtype([
    ("seq", "<u4"), ("type", "<u2"), ("dst_rank", "<u2"), ("chunk", "<u4"), ("bytes", "<u4"),
    ("src_off", "<u8"), ("dst_off", "<u8"), ("epoch", "<u8"), ("timestamp", "<u8"),
])
assert CMD_DTYPE.itemsize == COMMAND_BYTES == 48

# mk_ring_ctl: tail (credits) and abort, one cache line each (int64 word indices).
CTL_WORDS = 16
CTL_TAIL, CTL_ABORT = 0, 8

# a device wait checks its deadline every WAIT_CHECK_EVERY polls and the abort word (host memory)
# every WAIT_ABORT_EVERY (MK_WAIT_*)
WAIT_CHECK_EVERY, WAIT_ABORT_EVERY = 256, 4096
# a failed wait's role (mk_role: mkernel.ir.Role's order) and what it waited on (mk_what)
ROLE_COMPUTE, ROLE_INTRA, ROLE_SEND, ROLE_RECV = 0, 1, 2, 3
WHAT_FLAG, WHAT_RING_SLOT, WHAT_BULK_STAGE = 0, 1, 2

ERRORS = {
    0: "ok", 1: "bad command type", 2: "destination rank out of range", 3: "zero-byte PUT",
    4: "source range outside the send buffer", 5: "destination range outside the receive buffer",
    6: "chunk outside the arrival flags", 7: "transport failure", 8: "timeout", 9: "aborted",
}
ERR_TIMEOUT, ERR_ABORTED = 8, 9


@dataclass(frozen=True)
class Command:
    """One ring record's payload (``seq`` is the ring's business, not the caller's)."""

    type: int
    dst_rank: int
    chunk: int
    bytes: int
    src_off: int
    dst_off: int
    epoch: int
    timestamp: int = 0


def encode(cmd: Command, seq: int) -> bytes:
    """The 48 bytes a producer writes for ``cmd`` in ring slot ``seq - 1``."""
    rec = np.zeros((), CMD_DTYPE)
    rec["seq"] = seq
    for name in Command.__dataclass_fields__:
        rec[name] = getattr(cmd, name)
    return rec.tobytes()


def decode(raw: bytes) -> tuple[int, Command]:
    """(seq, command) from 48 bytes."""
    rec = np.frombuffer(raw, CMD_DTYPE, count=1)[0]
    return int(rec["seq"]), Command(**{n: int(rec[n]) for n in Command.__dataclass_fields__})


class Faults(ctypes.Structure):
    """mk_faults: injected proxy faults (all zero: none)."""

    _fields_ = [("seed", ctypes.c_uint64), ("drop_ppm", ctypes.c_uint32), ("reorder", ctypes.c_uint32),
                ("delay_ns", ctypes.c_uint64), ("die_after", ctypes.c_uint64)]


class ProxyConfig(ctypes.Structure):
    _fields_ = [
        ("rank", ctypes.c_int32), ("nranks", ctypes.c_int32), ("capacity", ctypes.c_uint64),
        ("max_batch", ctypes.c_uint32), ("n_flags", ctypes.c_uint32), ("window_ns", ctypes.c_uint64),
        ("src_base", ctypes.c_uint64), ("src_bytes", ctypes.c_uint64),
        ("dst_base", ctypes.POINTER(ctypes.c_uint64)), ("dst_bytes", ctypes.POINTER(ctypes.c_uint64)),
        ("flag_base", ctypes.POINTER(ctypes.c_uint64)), ("cpu", ctypes.c_int32), ("faults", Faults),
        ("idle_spin_ns", ctypes.c_uint64), ("idle_sleep_ns", ctypes.c_uint64),
    ]


class TransportOptions(ctypes.Structure):
    _fields_ = [
        ("seed", ctypes.c_uint64), ("unordered", ctypes.c_int), ("gbytes_per_s", ctypes.c_double),
        ("latency_ns", ctypes.c_uint64), ("device", ctypes.c_int), ("streams", ctypes.c_int),
        ("flag_early", ctypes.c_int),
    ]


class ProxyError(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_int32), ("rank", ctypes.c_int32), ("slot", ctypes.c_uint64),
        ("dst_rank", ctypes.c_uint32), ("chunk", ctypes.c_uint32), ("epoch", ctypes.c_uint64),
        ("msg", ctypes.c_char * 256),
    ]


class ProxyStats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("commands", "batches", "bytes", "full_batches", "polls_idle",
                                               "transport_ns", "driver_calls", "killed", "idle_sleeps")]


class NetOptions(ctypes.Structure):
    """mk_net_opts (csrc/mk_net.h): one rank's network transport, before it connects."""

    _fields_ = [
        ("rank", ctypes.c_int32), ("nranks", ctypes.c_int32), ("n_flags", ctypes.c_uint32),
        ("mem_kind", ctypes.c_int32), ("cuda_device", ctypes.c_int32),
        ("mem_base", ctypes.c_uint64), ("mem_bytes", ctypes.c_uint64), ("flag_base", ctypes.c_uint64),
        ("peers", ctypes.POINTER(ctypes.c_uint8)), ("device", ctypes.c_char * 64), ("provider", ctypes.c_char * 64),
        ("port", ctypes.c_int32), ("gid_index", ctypes.c_int32), ("sq_depth", ctypes.c_uint32),
        ("rq_depth", ctypes.c_uint32), ("signal_every", ctypes.c_uint32), ("publish", ctypes.c_int32),
        ("plant", ctypes.c_int32), ("timeout_ns", ctypes.c_uint64),
    ]


class NetAddr(ctypes.Structure):
    """mk_net_addr: the header of every address blob a rank publishes for its peers."""

    _fields_ = [("magic", ctypes.c_uint32), ("kind", ctypes.c_uint32), ("rank", ctypes.c_int32),
                ("nranks", ctypes.c_int32), ("base", ctypes.c_uint64), ("bytes", ctypes.c_uint64),
                ("key", ctypes.c_uint64), ("n_flags", ctypes.c_uint32), ("len", ctypes.c_uint32)]


NET_MAGIC = 0x314E4B4D
NET_ADDR_MAX = 8192
MEM_HOST, MEM_CUDA = 0, 1
PUBLISH_STORE, PUBLISH_LOOPBACK = 0, 1
PLANT_NONE, PLANT_FLAG_WRITE = 0, 1
