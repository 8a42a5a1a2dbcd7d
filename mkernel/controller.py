"""The adaptive SM partition (issue 7): one policy, declared once, that moves SMs between the
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

Backends call :meth:`Balance.targets`; the simulator through :func:`sim_controller`.
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
        """The policy with ``link_sms`` from the cluster's NVLink terms (23 on the measured H200 pair)."""
        return cls(link_sms=max(1, math.ceil(c.nvlink.bw_gb_per_s / c.nvlink.sm_copy_gb_per_s)))

    def targets(self, movable: int, compute_us: float, intra_us: float, current_intra: int,
                blocked_compute: int = 0, blocked_intra: int = 0) -> int:
        """The intra role's SM target out of ``movable`` (compute gets the rest). SMs of one role
        that are blocked waiting for the other role's output are lent to that other role, but the
        intra role keeps enough SMs to drive its NVLink port while it has work: lending those away
        leaves the link idle, and a link-bound op pays for it at the end."""
        if intra_us <= 0:
            return 0
        if compute_us <= 0:
            return movable
        want = round(movable * intra_us / (compute_us + intra_us)) - blocked_intra + blocked_compute
        want = max(want, min(self.link_sms, movable - self.min_sms))
        want = min(want, 2 * self.link_sms)  # both port directions saturated: more intra SMs add nothing
        want = min(max(want, self.min_sms), movable - self.min_sms)
        return current_intra if abs(want - current_intra) <= self.hysteresis else want


@dataclass
class Trajectory:
    """(time us, intra target) per rank, as the controller set them."""

    points: dict[int, list[tuple[float, int]]] = field(default_factory=dict)


def sim_controller(policy: Balance, trajectory: Trajectory | None = None):
    """The policy as the simulator's controller hook: ``controller(rank, pool, now_us)``."""
    def control(rank: int, pool, now_us: float) -> None:
        if Role.INTRA not in pool.target or Role.COMPUTE not in pool.target:
            return
        movable = pool.target[Role.INTRA] + pool.target[Role.COMPUTE]
        intra = policy.targets(movable, pool.remaining[Role.COMPUTE], pool.remaining[Role.INTRA],
                               pool.target[Role.INTRA], pool.blocked[Role.COMPUTE], pool.blocked[Role.INTRA])
        if intra != pool.target[Role.INTRA]:
            pool.retarget({Role.INTRA: intra, Role.COMPUTE: movable - intra})
            if trajectory is not None:
                trajectory.points.setdefault(rank, []).append((now_us, intra))

    return control
