"""The adaptive SM partition: one policy, declared once, that moves SMs between the
compute and intra-node roles of a running fused kernel.

Why not react to stalls (the reference code's law): by the time compute stalls, the input it waits
for is late already, and AllGather+GEMM loses badly. This policy acts before: at every task
boundary it compares the *remaining work* of the two roles, in SM-microseconds estimated from the
schedule itself (tile FLOPs, bytes; the simulator's uncontended costs), and splits the movable SMs
in proportion, so both roles are projected to finish together. A role with work left keeps at least
``min_sms``; a role without work gives all its SMs away. ``hysteresis`` keeps the split from
flapping by one SM at every boundary. The send and receive roles keep their budgets (their work is
bounded by the proxy and the NIC, not by SMs).

The data dependency is in the estimate without special cases: in AllGather+GEMM the intra work is
front-loaded (every tile waits for it), so its share is large at the start and shrinks; in
GEMM+ReduceScatter the intra work trails the tiles it reduces, so intra starts small and grows.

The policy is :func:`split`, one integer function: the simulator calls it (through
:meth:`Balance.targets` and :func:`sim_controller`) and the GPU kernel compiles the same function
(:mod:`mkernel.hw.kernels.fused`), where blocks keep the counters it reads (remaining work claimed, blocks
active and blocked per role) and change roles at task boundaries.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .ir import Role


@dataclass(frozen=True)
class Balance:
    min_sms: int = 1
    hysteresis: int = 2
    link_sms: int = 15  # SMs that saturate the NVLink port: ceil(port GB/s / one SM's copy GB/s)

    @classmethod
    def for_cluster(cls, c) -> Balance:
        """The policy with ``link_sms``: the fused kernel's SMs that fill the NVLink port, each moving
        one full copy step per load round trip (15 with the H200 profile: 32 KiB per 0.60 us of
        transfer + 0.65 us of round trip; 23 at the measured peer-store rate, without steps)."""
        g = c.gpu
        step = g.fused_step_rows * g.fused_step_cols * 2  # bf16 bytes of one step
        per_sm = step / (step / c.sm_copy_gb_per_s + g.fused_peer_step_us * 1e3)  # GB/s = bytes per ns
        return cls(link_sms=max(1, math.ceil(c.nvlink.bw_gb_per_s / per_sm)))

    def targets(self, movable: int, compute_us: float, intra_us: float, current_intra: int,
                blocked_compute: int = 0, blocked_intra: int = 0) -> int:
        """The intra role's SM target out of ``movable`` (compute gets the rest): :func:`split` on
        the remaining work in whole nanoseconds, the unit the GPU's counters keep."""
        return split(movable, ns(compute_us), ns(intra_us), current_intra, blocked_compute, blocked_intra,
                     self.min_sms, self.hysteresis, self.link_sms)


def ns(us: float) -> int:
    """Work in whole nanoseconds (at least 1 while any is left): the policy's integer unit."""
    return max(1, round(us * 1000)) if us > 0 else 0


def split(movable, compute, intra, current, blocked_compute, blocked_intra, min_sms, hysteresis, link_sms):
    """The policy itself, in integers: the intra role's target out of ``movable`` SMs, given the
    remaining work of each role (ns of one SM), the current target and the SMs of each role now
    blocked on the other role's output.

    Both roles are projected to finish together (SMs in proportion to remaining work). SMs of one
    role blocked on the other's output are lent to that other role, but the intra role keeps the
    SMs that drive its NVLink port while it has work (lending those leaves the link idle, and a
    link-bound op pays for it at the end) and never takes more than saturate both port directions.
    A role with work keeps ``min_sms``; one without gives all away; ``hysteresis`` keeps the target
    from flapping by an SM at every boundary.

    Written once, for both backends: the simulator calls it as Python, and :mod:`mkernel.hw.kernels.fused`
    compiles the same function into the GPU kernel with ``triton.jit``. Hence the restricted form:
    integer arithmetic, builtin ``min``/``max`` and 0/1 flags instead of branches.
    """
    total = max(compute + intra, 1)
    want = (2 * movable * intra + total) // (2 * total) - blocked_intra + blocked_compute
    want = max(want, min(link_sms, movable - min_sms))
    want = min(want, 2 * link_sms)
    near = (want - current <= hysteresis) * (current - want <= hysteresis)
    want = want + near * (current - want)
    want = min(max(want, min_sms), movable - min_sms)  # last: the kernel's progress needs both bounds
    has_intra = intra > 0
    has_compute = compute > 0
    return has_intra * (want + (1 - has_compute) * (movable - want))


@dataclass
class Trajectory:
    """(time us, intra target) per rank, as the controller set them."""

    points: dict[int, list[tuple[float, int]]] = field(default_factory=dict)


def sim_controller(policy: Balance, trajectory: Trajectory | None = None):
    """The policy as the simulator's controller hook: ``controller(rank, pool, now_us)``."""
    def control(rank: int, pool, now_us: float) -> None:
        target = pool.target  # (read once: a view made at each read)
        if Role.INTRA not in target or Role.COMPUTE not in target:
            return
        movable = target[Role.INTRA] + target[Role.COMPUTE]
        left = {role: pool.remaining[role] if pool.has_work(role) else 0.0 for role in (Role.COMPUTE, Role.INTRA)}
        intra = policy.targets(movable, left[Role.COMPUTE], left[Role.INTRA], target[Role.INTRA],
                               pool.blocked[Role.COMPUTE], pool.blocked[Role.INTRA])
        if intra != target[Role.INTRA]:
            pool.retarget({Role.INTRA: intra, Role.COMPUTE: movable - intra})
            if trajectory is not None:
                trajectory.points.setdefault(rank, []).append((now_us, intra))

    return control
