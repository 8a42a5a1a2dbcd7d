"""Device-side runtime state, allocated once and reused across calls: the command ring, epochs and
the device error block. torch tensors hold the memory; kernels get raw pointers.

- :class:`DeviceRing`: records and control words in pinned host memory that the GPU maps (the GPU
  writes records with system-scope release stores, the proxy thread reads them), and the producers'
  claim counter in device memory.
- :class:`Epoch`: one counter per plan, bumped by the kernel itself, so nothing is zeroed between
  calls and the host never waits.
- :class:`ErrorBlock`: where a failed bounded wait records rank, role, flag or slot, and epoch
  (the layout: ``csrc/mk_ring.h``'s mk_dev_err, mirrored by layout.ErrorField).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mkernel.errors import MkernelError
from mkernel.ir import Role

from ..lowering import ring
from ..lowering.layout import ERROR_BYTES, ErrorField

ROLES = tuple(r.value for r in Role)  # by device role code (mk_role, in Role's order)
WHATS = {ring.WHAT_FLAG: "flag", ring.WHAT_RING_SLOT: "ring slot"}  # a bulk stage prints as its code


class DeviceWaitError(MkernelError):
    """A bounded wait on the GPU ran out or was aborted; the message names rank, role, flag and epoch."""


class DeviceRing:
    """The GPU->host command ring: ``capacity`` 48-byte records plus control words, all pinned."""

    def __init__(self, capacity: int, device):
        import torch

        self.capacity = capacity
        self.records = torch.zeros(capacity * ring.CMD_DTYPE.itemsize, dtype=torch.uint8, pin_memory=True)
        self.ctl = torch.zeros(ring.CTL_WORDS, dtype=torch.int64, pin_memory=True)
        # the producers' words (sync._push): slots claimed, the last tail seen, the tail poller's lock
        self.head = torch.zeros(3, dtype=torch.int64, device=device)

    @property
    def ring_ptr(self) -> int:
        return self.records.data_ptr()

    @property
    def ctl_ptr(self) -> int:
        return self.ctl.data_ptr()

    def kernel_args(self) -> tuple:
        """(records, ctl, head, capacity) as the device code takes them (:func:`mkernel.hw.kernels.sync._push`)."""
        return self.ring_ptr, self.ctl_ptr, self.head, self.capacity


class Epoch:
    """A device epoch counter and its finished-blocks counter, for the self-test kernels
    (:mod:`mkernel.hw.measure.ring_kernels`; the fused kernel keeps its own per plan, :mod:`fused`):
    a call reads the stored value + 1, its last block (:func:`sync._last_block`) stores it."""

    def __init__(self, device):
        import torch

        self.value = torch.zeros(1, dtype=torch.int64, device=device)
        self.done = torch.zeros(1, dtype=torch.int32, device=device)

    def kernel_args(self) -> tuple:
        """(epoch_ptr, done_ptr) as the device code takes them."""
        return self.value, self.done

    def current(self) -> int:
        """The last finished epoch (synchronises; for tests and checks, not the hot path)."""
        return int(self.value.item())


@dataclass(frozen=True)
class WaitFailure:
    code: int
    rank: int
    role: str
    what: str
    index: int
    epoch: int
    observed: int
    expected: int

    def __str__(self) -> str:
        return (f"rank {self.rank}, {self.role} role: {ring.ERRORS.get(self.code, self.code)} waiting on "
                f"{self.what} {self.index} in epoch {self.epoch} (saw {self.observed}, needed {self.expected})")


class ErrorBlock:
    """The device error block (layout.ErrorField): int code, rank, role, what; u64 index, epoch,
    observed, expected; the schedule task."""

    def __init__(self, device):
        import torch

        self.words = torch.zeros(ERROR_BYTES // 8, dtype=torch.int64, device=device)

    def kernel_args(self) -> tuple:
        """(err32, err64): the block as the device code's error record takes it (:func:`sync._record`)."""
        import torch

        return self.words.view(torch.int32), self.words

    def read(self) -> WaitFailure | None:
        """The first recorded failure, or None (synchronises with the device)."""
        raw = self.words.cpu().numpy().view(np.uint8)
        i32 = {f: int(raw[f:f + 4].view(np.int32)[0]) for f in (ErrorField.CODE, ErrorField.RANK, ErrorField.ROLE,
                                                                 ErrorField.WHAT)}
        if i32[ErrorField.CODE] == 0:
            return None
        u64 = {f: int(raw[f:f + 8].view(np.uint64)[0]) for f in (ErrorField.INDEX, ErrorField.EPOCH, ErrorField.SEEN,
                                                                  ErrorField.EXPECTED)}
        role, what = i32[ErrorField.ROLE], i32[ErrorField.WHAT]
        return WaitFailure(i32[ErrorField.CODE], i32[ErrorField.RANK],
                           ROLES[role] if 0 <= role < len(ROLES) else str(role), WHATS.get(what, str(what)),
                           u64[ErrorField.INDEX], u64[ErrorField.EPOCH], u64[ErrorField.SEEN], u64[ErrorField.EXPECTED])

    def task(self) -> int:
        """The schedule task of the recorded failure (-1: the call barrier); synchronises."""
        return int(self.words[ErrorField.TASK // 8].item())

    def check(self) -> None:
        failure = self.read()
        if failure is not None:
            raise DeviceWaitError(str(failure))

    def clear(self) -> None:
        self.words.zero_()
