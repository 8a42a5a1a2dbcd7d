"""The adaptive SM partition's device side: the controller state the fused kernel's movable blocks
share (one int64 array per executor), the policy compiled from the simulator's own function, and
the two decisions a block makes at each task boundary, re-evaluating the target (:func:`_steer`)
and picking its next role (:func:`_pick`).

Why its own module: it is the one part of the kernel that is a protocol between blocks rather
than a data op, and the host reads the same words (fused_launch.trajectory, the initial split).
"""
from __future__ import annotations

import triton
import triton.language as tl

from mkernel import controller

from .sync import _clock

C = tl.constexpr
# Two packed words hold what a decision reads, so a task boundary costs two reads, not seven:
# CTRL: 8-bit fields target intra blocks | active compute | active intra | blocked compute | blocked
# intra; WORK: the unclaimed work of compute | intra, 32 bits each, in UNIT_NS units. Then the log.
CTRL, WORK, WRITTEN, FIRST, LAST, START = C(0), C(1), C(2), C(3), C(4), C(5)
TARGET, ACTIVE, BLOCKED = C(0), C(8), C(24)  # CTRL bit offsets; per-role fields follow at +8
FIELD = C(255)
UNIT_NS = C(256)
STATE_WORDS = 6
_policy = triton.jit(controller.split)  # the one policy, compiled from the same Python function the simulator calls


@triton.jit
def _read(ptr):
    """A shared word, read the same by every thread of the block. A volatile load is not: each
    thread loads for itself, and threads that see different values take different branches (a
    warpgroup split across roles runs wgmma half-populated). A scalar atomic runs once per block
    and hands its result to every thread."""
    return tl.atomic_add(ptr, 0, sem="relaxed", scope="gpu")


@triton.jit
def _steer(state, log, movable, min_sms, hysteresis, link_sms, LOG: tl.constexpr):
    """Re-evaluate the target at a task boundary; a change is a compare-and-swap of the control
    word, logged by the block whose swap won. Returns the unclaimed work of compute and intra."""
    ctrl = _read(state + CTRL)
    work = _read(state + WORK)
    rem_c = work & 0xFFFFFFFF
    rem_i = work >> 32
    cur = (ctrl >> TARGET) & FIELD
    want = _policy(movable.to(tl.int64), rem_c, rem_i, cur, (ctrl >> BLOCKED) & FIELD, (ctrl >> (BLOCKED + 8)) & FIELD,
                   min_sms, hysteresis, link_sms)
    if want != cur:
        if tl.atomic_cas(state + CTRL, ctrl, ctrl - cur + want, sem="relaxed", scope="gpu") == ctrl:
            k = tl.atomic_add(state + WRITTEN, 1, sem="relaxed", scope="gpu") % LOG
            tl.store(log + 2 * k, _clock())
            tl.store(log + 2 * k + 1, want)
    return rem_c, rem_i


@triton.jit
def _pick(state, rem_c, rem_i, movable, role):
    """The role this block serves next, or -1 to retire: its own role if that has unclaimed work
    and fewer active blocks than its target, else the other role on the same terms (the
    simulator's :meth:`~mkernel.sim.sms.RolePool.next_task`). A block joins a role by an atomic
    increment of its active field, judged against the target in the same word, and takes it back
    when the role turns out full: no role with unclaimed work and a target of at least one is
    ever left without a block."""
    choice = role - role - 1
    for k in tl.static_range(2):
        cand = role if k == 0 else 1 - role
        if choice < 0:
            if tl.where(cand == 0, rem_c, rem_i) > 0:
                one = _bit(ACTIVE + 8 * cand)
                old = tl.atomic_add(state + CTRL, one, sem="relaxed", scope="gpu")
                intra = (old >> TARGET) & FIELD
                target = tl.where(cand == 1, intra, movable - intra)
                if ((old >> (ACTIVE + 8 * cand)) & FIELD) < target:
                    choice = cand
                else:
                    tl.atomic_add(state + CTRL, -one, sem="relaxed", scope="gpu")
    return choice


@triton.jit
def _reset(state, ctrl0, work):
    """After the last block: the initial control word and work again, and this call's log window."""
    tl.store(state + CTRL, ctrl0)
    tl.store(state + WORK, work)
    tl.store(state + FIRST, tl.load(state + LAST))
    tl.store(state + LAST, tl.load(state + WRITTEN, volatile=True))


@triton.jit
def _bit(shift):
    """1 << shift in 64 bits (the control word's fields reach bit 40)."""
    return tl.full((), 1, tl.int64) << shift


def control_word(target: int, active_compute: int, active_intra: int) -> int:
    """The CTRL word the kernel starts from (nothing blocked)."""
    return target << int(TARGET) | active_compute << int(ACTIVE) | active_intra << (int(ACTIVE) + 8)


def work_units(ns: int) -> int:
    """A task's work in the kernel's unit (at least 1 for any task with work)."""
    return -(-ns // int(UNIT_NS))


LOG_ENTRIES = 4096  # target changes the controller logs per call (a ring: a longer call keeps its last ones)
