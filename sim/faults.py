"""Seeded fault injection for the simulator: what goes wrong, and what the run must do about it.

The contract: under every fault, a run either produces the right result or stops with a
clear error; never silent corruption, never a hang. Each knob is off at its default:

=================  ==========================================================================
``delay_us``       every network message waits an extra exponential delay of this mean
``reorder``        probability that a message is held back ``reorder_us``, so later ones pass it
``duplicate``      probability that a message is delivered twice (again ``reorder_us`` later);
                   data rewrites the same bytes and a flag is *set* (to the epoch, as on hw),
                   so the second delivery changes nothing
``drop``           probability that a transmission is lost on the wire. As on RC (and SRD), the
                   sender's NIC sends it again when its ack timer (``retransmit_us``) runs out, up
                   to ``retries`` times (IB's retry count, at most 7); a message lost that often is
                   an error completion, and the run stops with a TransportError naming it
``slow_rank``      this rank's SMs take ``slow_factor`` times longer for every task
``stall_rank``     this rank's proxy stops posting from ``stall_at_us`` for ``stall_us``
                   (``inf``: for good, which ends in a deadlock error naming the stall)
``nic_down``       (rank, nic): that NIC carries nothing; messages stripe over the rank's other
                   NICs, and with none left they are lost (and named in the deadlock error)
=================  ==========================================================================

``seed`` drives every random draw, so a faulty run replays exactly.

The ack timer's default is the transport's (:data:`RETRANSMIT_US`): IB RC's local ACK timeout is
4.096 us x 2^t, and t = 14 (67 ms) is a common floor in practice; SRD resends within tens of
microseconds (an assumption, not a measurement). Set ``retransmit_us`` to study another.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, fields

from mkernel.errors import InputError

RETRANSMIT_US = {"ib_rc": 4.096 * 2 ** 14, "ibgda": 4.096 * 2 ** 14, "efa_srd": 50.0}  # ack timer per transport


@dataclass(frozen=True)
class Faults:
    seed: int = 0
    delay_us: float = 0.0
    reorder: float = 0.0
    reorder_us: float = 20.0
    duplicate: float = 0.0
    drop: float = 0.0
    slow_rank: int = -1
    slow_factor: float = 1.0
    stall_rank: int = -1
    stall_at_us: float = 0.0
    stall_us: float = 0.0
    nic_down: tuple[int, int] | None = None
    retries: int = 7
    retransmit_us: float = -1.0  # < 0: the transport's (RETRANSMIT_US)

    def __post_init__(self) -> None:
        for name in ("reorder", "duplicate", "drop"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise InputError(f"fault {name}={getattr(self, name)} is a probability: allowed [0, 1]")
        for name in ("delay_us", "reorder_us", "stall_at_us", "stall_us"):
            if not getattr(self, name) >= 0.0:
                raise InputError(f"fault {name}={getattr(self, name)} must be >= 0")
        if not (self.slow_factor >= 1.0 and math.isfinite(self.slow_factor)):
            raise InputError(f"fault slow_factor={self.slow_factor} must be a finite factor >= 1")
        if not 0 <= self.retries <= 7:
            raise InputError(f"fault retries={self.retries}: a NIC retries 0 to 7 times")
        if not (self.retransmit_us < 0 or math.isfinite(self.retransmit_us)):
            raise InputError(f"fault retransmit_us={self.retransmit_us} must be finite")

    def ack_timer_us(self, transport: str) -> float:
        """How long a sender waits for an ack before it resends."""
        return self.retransmit_us if self.retransmit_us >= 0 else RETRANSMIT_US.get(transport, RETRANSMIT_US["ib_rc"])

    @property
    def any(self) -> bool:
        return self != Faults(seed=self.seed)


def parse(text: str) -> Faults:
    """``"drop=0.1,delay_us=5,seed=3,nic_down=2:0"`` -> Faults, with one clear error for a bad key."""
    kinds = {f.name: f.type for f in fields(Faults)}
    args: dict = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or key not in kinds:
            raise InputError(f"--faults item {item!r}: expected key=value with key one of {', '.join(kinds)}")
        try:
            if key == "nic_down":
                rank, nic = value.split(":")
                args[key] = (int(rank), int(nic))
            elif key in ("seed", "slow_rank", "stall_rank", "retries"):
                args[key] = int(value)
            else:
                args[key] = float(value)
        except ValueError:
            raise InputError(f"--faults item {item!r}: bad value for {key}"
                             + (" (rank:nic)" if key == "nic_down" else "")) from None
    return Faults(**args)


class Injector:
    """The run-time side: seeded draws per message, and a log of what was injected."""

    def __init__(self, faults: Faults | None) -> None:
        self.f = faults or Faults()
        self.rng = random.Random(self.f.seed ^ 0xFA17)
        self.dropped = 0  # transmissions lost on the wire (each resent, or the message lost)
        self.lost_to_nic = 0
        self.duplicated = 0
        self.reordered = 0

    def extra_delay(self) -> float:
        f = self.f
        extra = self.rng.expovariate(1.0 / f.delay_us) if f.delay_us > 0 else 0.0
        if f.reorder > 0 and self.rng.random() < f.reorder:
            self.reordered += 1
            extra += f.reorder_us
        return extra

    def drops(self) -> bool:
        if self.f.drop > 0 and self.rng.random() < self.f.drop:
            self.dropped += 1
            return True
        return False

    def duplicates(self) -> bool:
        if self.f.duplicate > 0 and self.rng.random() < self.f.duplicate:
            self.duplicated += 1
            return True
        return False

    def nic(self, ends: tuple[int, int], seq: int, count: int) -> int | None:
        """The NIC (rail) a message between ``ends`` uses: round-robin over the ones working at
        both ends, or None when there is none."""
        down = self.f.nic_down
        if down is None:  # (every NIC works: the round-robin over all of them)
            return seq % count
        working = [i for i in range(count) if down not in ((ends[0], i), (ends[1], i))]
        if not working:
            self.lost_to_nic += 1
            return None
        return working[seq % len(working)]

    def slowdown(self, rank: int) -> float:
        return self.f.slow_factor if rank == self.f.slow_rank else 1.0

    def stall(self, rank: int, now: float) -> float | None:
        """How long the proxy of ``rank`` must stop now (inf: for good), or None."""
        f = self.f
        if rank != f.stall_rank or f.stall_us <= 0 or now < f.stall_at_us:
            return None
        end = f.stall_at_us + f.stall_us
        return end - now if now < end else None

    def report(self) -> str:
        """What was injected, for a deadlock message (empty when nothing was)."""
        parts = []
        if self.dropped:
            parts.append(f"{self.dropped} network messages dropped")
        if self.lost_to_nic:
            parts.append(f"{self.lost_to_nic} messages lost: NIC {self.f.nic_down[1]} of rank "
                         f"{self.f.nic_down[0]} is down and the rank has no other")
        if self.f.stall_rank >= 0 and self.f.stall_us == math.inf:
            parts.append(f"the proxy of rank {self.f.stall_rank} stalled for good at {self.f.stall_at_us} us")
        return ("injected faults: " + "; ".join(parts)) if parts else ""
